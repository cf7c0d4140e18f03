package topk

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"
	"unsafe"
)

// TestSketchBounds checks the space-saving guarantees against exact counts
// on a skewed stream: every counted id has Count−Err ≤ true ≤ Count, Err ≤
// N/k, and every id seen more than N/k times is counted.
func TestSketchBounds(t *testing.T) {
	const k = 32
	s := NewSketch(k)
	exact := map[string]uint64{}
	rng := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(rng, 1.2, 1, 5000)
	for range 100_000 {
		id := "ip:10.0." + strconv.FormatUint(z.Uint64(), 10)
		s.Add(id)
		exact[id]++
	}
	n := s.Total()
	counted := map[string]bool{}
	s.Each(func(id string, count, err uint64) {
		counted[id] = true
		c := exact[id]
		if count < c || count-err > c {
			t.Errorf("%s: true %d outside [%d, %d]", id, c, count-err, count)
		}
		if err > n/k {
			t.Errorf("%s: error %d > N/k = %d", id, err, n/k)
		}
	})
	for id, c := range exact {
		if c > n/k && !counted[id] {
			t.Errorf("%s seen %d > N/k = %d times but not counted", id, c, n/k)
		}
		if !counted[id] && c > s.Min() {
			t.Errorf("%s not counted, seen %d > Min %d", id, c, s.Min())
		}
	}
	if len(counted) != k {
		t.Errorf("%d counters in use, want %d", len(counted), k)
	}
}

// TestSketchTableSurvivesChurn replaces counters many times (every
// addition a new id) and checks that every counted id is still found by
// its hash: the backward-shift deletion must keep probe chains whole.
func TestSketchTableSurvivesChurn(t *testing.T) {
	s := NewSketch(8)
	for i := range 10_000 {
		s.Add(fmt.Sprintf("h:%032x", i))
		s.Each(func(id string, _, _ uint64) {
			if !s.has(id) {
				t.Fatalf("after %d additions %s is counted but not in the table", i, id)
			}
		})
	}
}

// TestFloodKeepsMemoryAndHeavyHitter is the admin page's worst case: a
// flood of 1,000,000 distinct refused clients, with one client refused
// steadily at 5 % of the stream, over one minute of a 6 × 10 s window. The
// heap must not grow with the clients, Add must not allocate, and the
// steady client must rank first. Under -race (CI's run) the flood is
// 200,000 clients, to stay a few seconds; `go test ./internal/topk` runs
// the full million.
func TestFloodKeepsMemoryAndHeavyHitter(t *testing.T) {
	const k, steps = 128, 6
	var empty, before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&empty)
	w := NewWindow(k, steps, 10*time.Second)
	start := time.Unix(1_700_000_000, 0)
	runtime.GC()
	runtime.ReadMemStats(&before)
	heavy := uint64(0)
	buf := make([]byte, 0, MaxIDLen)
	clients := 1_000_000
	if raceEnabled {
		clients = 200_000
	}
	for i := range clients {
		// Each client id is written into buf and passed without a copy:
		// Add copies what it keeps, and the test's own garbage would hide
		// the sketch's in the heap figures.
		buf = strconv.AppendInt(append(buf[:0], "ip:10.0.0.0/"...), int64(i), 10)
		now := start.Add(time.Duration(i) * 55 * time.Second / time.Duration(clients)) // over 55 s
		w.Add(now, unsafe.String(&buf[0], len(buf)))
		if i%19 == 0 {
			w.Add(now, "ip:192.0.2.66")
			heavy++
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	held := 0
	for _, b := range w.ring {
		held += cap(b.s.items)*int(unsafe.Sizeof(counter{})) + 4*cap(b.s.heap) + 4*len(b.s.table)
	}
	t.Logf("window of %d × %d counters holds %d bytes of counters and index (heap %+d at NewWindow); heap %+d bytes after %d distinct clients",
		steps, k, held, int64(before.HeapAlloc)-int64(empty.HeapAlloc), grew, clients)
	if grew > 64<<10 {
		t.Errorf("heap grew by %d bytes over the flood of %d clients; want it bounded (< 64 KiB)", grew, clients)
	}
	top, total := w.Top(start.Add(55*time.Second), 20)
	if len(top) == 0 || top[0].ID != "ip:192.0.2.66" {
		t.Fatalf("top = %v; want ip:192.0.2.66 first", top[:min(3, len(top))])
	}
	if h := top[0]; h.Count < heavy*5/6 || h.Count-h.Err > heavy || h.Err > total/k {
		t.Errorf("heavy hitter %+v: want Count−Err ≤ its in-window count ≤ Count, error ≤ N/k = %d (sent %d in 55 s)", h, total/k, heavy)
	}
	if allocs := testing.AllocsPerRun(1000, func() { w.Add(start.Add(55*time.Second), "ip:203.0.113.9") }); allocs != 0 {
		t.Errorf("Window.Add allocates %v times per call; want 0", allocs)
	}
}

// TestWindowForgets checks the span: an id counted in one step is gone
// once the ring has moved past it, and steps are summed while inside.
func TestWindowForgets(t *testing.T) {
	w := NewWindow(4, 6, 10*time.Second)
	t0 := time.Unix(1_000_000, 0)
	for range 5 {
		w.Add(t0, "h:old")
	}
	w.Add(t0.Add(30*time.Second), "h:old")
	w.Add(t0.Add(30*time.Second), "h:new")
	top, total := w.Top(t0.Add(59*time.Second), 10)
	if want := []Entry{{ID: "h:old", Count: 6}, {ID: "h:new", Count: 1}}; fmt.Sprint(top) != fmt.Sprint(want) || total != 7 {
		t.Errorf("at +59 s: %v (N=%d); want %v (N=7)", top, total, want)
	}
	top, total = w.Top(t0.Add(60*time.Second), 10)
	if want := []Entry{{ID: "h:new", Count: 1}, {ID: "h:old", Count: 1}}; fmt.Sprint(top) != fmt.Sprint(want) || total != 2 {
		t.Errorf("at +60 s: %v (N=%d); want %v (N=2)", top, total, want)
	}
	if top, _ = w.Top(t0.Add(100*time.Second), 10); len(top) != 0 {
		t.Errorf("at +100 s: %v; want nothing", top)
	}
}

// TestWindowMergeBounds checks the merged error when a step's sketch is
// full and lacks the id: its Min is added to both Count and Err.
func TestWindowMergeBounds(t *testing.T) {
	w := NewWindow(2, 2, time.Second)
	t0 := time.Unix(1_000_000, 0)
	for _, id := range []string{"a", "a", "a", "b", "b"} {
		w.Add(t0, id)
	}
	for _, id := range []string{"c", "c", "d"} {
		w.Add(t0.Add(time.Second), id)
	}
	top, _ := w.Top(t0.Add(time.Second), 1)
	if want := (Entry{ID: "a", Count: 4, Err: 1}); len(top) != 1 || top[0] != want {
		t.Errorf("top = %v; want %v (3 in step 1, at most Min 1 in step 2)", top, want)
	}
}

func BenchmarkWindowAdd(b *testing.B) {
	w := NewWindow(128, 6, 10*time.Second)
	ids := make([]string, 4096)
	for i := range ids {
		ids[i] = fmt.Sprintf("ip:10.0.%d.%d", i>>8, i&255)
	}
	now := time.Now()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		w.Add(now, ids[i&4095])
	}
}

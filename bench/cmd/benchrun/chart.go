package main

import (
	"bytes"
	"fmt"
	"image/color"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// bar is one target's figure in a chart panel, with its ratio to
// nginx + limit_req (nil: no ratio).
type bar struct {
	name  string
	value float64
	ratio *float64
}

// chartPanels returns the chart's two panels from rep's full-load
// medians: req/s of every measured target, and proxy CPU-µs per request
// of those that have one (not the upstream direct). Targets that were not
// measured are left out.
func chartPanels(rep throughputReport) (rps, cpu []bar) {
	for _, r := range rep.Targets {
		m := r.FullMedian
		if m == nil {
			continue
		}
		q := r.VsBaseline
		if q == nil {
			q = &ratios{}
		}
		rps = append(rps, bar{r.Name, m.RPS, q.RPS})
		if m.ProxyCPUus != nil {
			cpu = append(cpu, bar{r.Name, *m.ProxyCPUus, q.ProxyCPU})
		}
	}
	return rps, cpu
}

// barPlot is one horizontal bar chart: the bars top to bottom in the order
// given, each labelled with its value (decimals places) and ratio.
func barPlot(title, axis string, bars []bar, decimals int) (*plot.Plot, error) {
	n := len(bars)
	values := make(plotter.Values, n)
	names := make([]string, n)
	labels := plotter.XYLabels{XYs: make(plotter.XYs, n), Labels: make([]string, n)}
	top := 0.0
	for i, b := range bars {
		j := n - 1 - i // NominalY puts index 0 at the bottom
		values[j], names[j] = b.value, b.name
		labels.XYs[j] = plotter.XY{X: b.value, Y: float64(j)}
		labels.Labels[j] = fmt.Sprintf("%.*f", decimals, b.value)
		if b.ratio != nil {
			labels.Labels[j] += fmt.Sprintf("  (%s)", ratio(b.ratio))
		}
		top = max(top, b.value)
	}
	chart, err := plotter.NewBarChart(values, vg.Points(11))
	if err != nil {
		return nil, fmt.Errorf("charting %s: %w", title, err)
	}
	chart.Horizontal = true
	chart.Color = color.RGBA{R: 70, G: 110, B: 170, A: 255}
	chart.LineStyle.Width = 0
	text, err := plotter.NewLabels(labels)
	if err != nil {
		return nil, fmt.Errorf("charting %s: %w", title, err)
	}
	text.Offset = vg.Point{X: vg.Points(4), Y: -vg.Points(3)}

	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = axis
	p.X.Min, p.X.Max = 0, top*1.35 // room for the labels
	p.X.Tick.Marker = plot.TickerFunc(plainTicks)
	p.Add(chart, text)
	p.NominalY(names...)
	return p, nil
}

// plainTicks are plot.DefaultTicks labelled without trailing zeros
// ("25000", not "25000.00").
func plainTicks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', -1, 64)
		}
	}
	return ticks
}

// writeChart renders rep's full-load medians as an SVG (the file at path):
// req/s (higher is better) above proxy CPU-µs per request (lower is
// better), each bar labelled with its ratio to nginx + limit_req (when the
// run has one).
// Errors: rep has no measured target, or writing the file failed.
func writeChart(path string, rep throughputReport) error {
	rps, cpu := chartPanels(rep)
	if len(rps) == 0 {
		return fmt.Errorf("charting %s: no target was measured", path)
	}
	title := "Full load: requests/s (median)"
	if slices.ContainsFunc(rps, func(b bar) bool { return b.ratio != nil }) {
		title = "Full load: requests/s (median; × = ratio to nginx + limit_req)"
	}
	top, err := barPlot(title, "requests/s", rps, 0)
	if err != nil {
		return err
	}
	rows := [][]*plot.Plot{{top}}
	if len(cpu) > 0 {
		bottom, err := barPlot("Proxy CPU per request (lower is better)", "CPU-µs per request", cpu, 1)
		if err != nil {
			return err
		}
		rows = append(rows, []*plot.Plot{bottom})
	}
	height := vg.Points(float64(60 + 22*(len(rps)+len(cpu)) + 70*len(rows)))
	svg := vgsvg.New(vg.Points(760), height)
	tiles := draw.Tiles{Rows: len(rows), Cols: 1, PadY: vg.Points(18), PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(6)}
	canvases := plot.Align(rows, tiles, draw.New(svg))
	for i, row := range rows {
		row[0].Draw(canvases[i][0])
	}
	var out bytes.Buffer
	if _, err := svg.WriteTo(&out); err != nil {
		return fmt.Errorf("charting %s: %w", path, err)
	}
	if err := writeFile(path, out.Bytes()); err != nil {
		return fmt.Errorf("writing chart: %w", err)
	}
	return nil
}

package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// stateFile is the state file's JSON: a version and the entries.
type stateFile struct {
	Version int       `json:"version"`
	Entries []*record `json:"entries"`
}

// stateVersion is the state file's format.
const stateVersion = 1

// readState reads the entries kept in path; a missing file holds none.
func readState(path string) ([]*record, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("control.state_file: %w", err)
	}
	var s stateFile
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("control.state_file %s: %w", path, err)
	}
	if s.Version != stateVersion {
		return nil, fmt.Errorf("control.state_file %s: version %d, want %d", path, s.Version, stateVersion)
	}
	for _, r := range s.Entries {
		if r == nil || r.ID == "" {
			return nil, fmt.Errorf("control.state_file %s: an entry without an id", path)
		}
	}
	return s.Entries, nil
}

// writeState writes recs to path atomically: to a temporary file in the
// same directory, synced, then renamed over path, so a crash leaves the
// old file or the new one, never half of one.
func writeState(path string, recs []*record) error {
	slices.SortFunc(recs, func(a, b *record) int { return strings.Compare(a.ID, b.ID) })
	b, err := json.Marshal(stateFile{Version: stateVersion, Entries: recs})
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("control.state_file: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("control.state_file: %w", err)
	}
	return nil
}

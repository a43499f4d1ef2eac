package tasks

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Store is the directory of imported tasks, <data dir>/tasks:
//
//	objects/<hash>/   an imported task's files, named by its Hash; never
//	                  changed once written (files read-only)
//	index/<id>        the hash the task id currently names, one line
//
// An import copies the task into objects/ (through a temporary directory
// renamed into place, so a reader never sees half a task) and then points
// index/<id> at it. Re-importing the same files changes nothing; importing
// other files under an existing id needs replace, and the old object stays,
// so that what a run recorded (id and hash) can still be read.
type Store struct {
	Dir string
}

// StoreDir is the store's directory under a data directory.
func StoreDir(dataDir string) string { return filepath.Join(dataDir, "tasks") }

// Imported is the outcome of an import.
type Imported struct {
	Task *Task
	// Previous is the hash id named before (empty for a new id).
	Previous string
	// Unchanged: the id already named these very files.
	Unchanged bool
}

// ErrNotFound is returned by Get for an id not in the store.
var ErrNotFound = errors.New("no such task")

// Import checks the task in src and adds it to the store. An id that
// already names other files is refused unless replace.
func (s Store) Import(src string, replace bool) (Imported, error) {
	t, err := Load(src)
	if err != nil {
		return Imported{}, err
	}
	id := t.Spec.ID
	prev, err := s.hashOf(id)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Imported{}, err
	}
	if prev == t.Hash {
		stored, err := s.Get(id)
		if err == nil {
			return Imported{Task: stored, Previous: prev, Unchanged: true}, nil
		}
		// A damaged object: write it again.
	} else if prev != "" && !replace {
		return Imported{}, fmt.Errorf("task %s is already imported with other files (hash %s, these are %s); replace it to import them",
			id, short(prev), short(t.Hash))
	}
	if err := s.writeObject(t); err != nil {
		return Imported{}, err
	}
	stored, err := s.object(t.Hash)
	if err != nil {
		return Imported{}, err
	}
	if err := s.point(id, t.Hash, prev == ""); err != nil {
		return Imported{}, err
	}
	return Imported{Task: stored, Previous: prev}, nil
}

// writeObject copies t's files into objects/<hash>, unless there already.
func (s Store) writeObject(t *Task) error {
	objects := filepath.Join(s.Dir, "objects")
	final := filepath.Join(objects, t.Hash)
	if _, err := os.Stat(final); err == nil {
		if old, err := Load(final); err == nil && old.Hash == t.Hash {
			return nil
		}
		// Damaged: move it aside and write it again.
		if err := os.Rename(final, final+".damaged-"+fmt.Sprint(os.Getpid())); err != nil {
			return fmt.Errorf("task store: %w", err)
		}
	}
	if err := os.MkdirAll(objects, 0o755); err != nil {
		return fmt.Errorf("task store: %w", err)
	}
	tmp, err := os.MkdirTemp(objects, ".import-")
	if err != nil {
		return fmt.Errorf("task store: %w", err)
	}
	defer os.RemoveAll(tmp)
	for _, f := range t.Files {
		b, err := os.ReadFile(t.Path(f.Path))
		if err != nil {
			return fmt.Errorf("import %s: %w", t.Dir, err)
		}
		dst := filepath.Join(tmp, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("task store: %w", err)
		}
		if err := os.WriteFile(dst, b, 0o444); err != nil {
			return fmt.Errorf("task store: %w", err)
		}
	}
	copied, err := Load(tmp)
	if err != nil {
		return fmt.Errorf("import %s: the copy is not the task checked (did its files change meanwhile?): %w", t.Dir, err)
	}
	if copied.Hash != t.Hash {
		return fmt.Errorf("import %s: its files changed while being copied (hash %s, then %s)", t.Dir, short(t.Hash), short(copied.Hash))
	}
	if err := os.Rename(tmp, final); err != nil {
		if _, statErr := os.Stat(final); statErr == nil {
			return nil // another import wrote the same object
		}
		return fmt.Errorf("task store: %w", err)
	}
	return nil
}

// point makes index/<id> name hash: created only if absent when create
// (so that two first imports of one id cannot both win), else replaced.
func (s Store) point(id, hash string, create bool) error {
	index := filepath.Join(s.Dir, "index")
	if err := os.MkdirAll(index, 0o755); err != nil {
		return fmt.Errorf("task store: %w", err)
	}
	tmp, err := os.CreateTemp(index, ".point-")
	if err != nil {
		return fmt.Errorf("task store: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(hash + "\n"); err != nil {
		tmp.Close()
		return fmt.Errorf("task store: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("task store: %w", err)
	}
	dst := filepath.Join(index, id)
	if create {
		if err := os.Link(tmp.Name(), dst); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("task %s: imported by another process meanwhile; import again to compare", id)
			}
			return fmt.Errorf("task store: %w", err)
		}
		return nil
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("task store: %w", err)
	}
	return nil
}

// hashOf reads index/<id>.
func (s Store) hashOf(id string) (string, error) {
	if err := CheckID(id); err != nil {
		return "", fmt.Errorf("task id: %w", err)
	}
	b, err := readMax(filepath.Join(s.Dir, "index", id), 256)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("task %s: %w (see wmrl tasks list)", id, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("task store: %w", err)
	}
	h := string(bytes.TrimSpace(b))
	if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
		return "", fmt.Errorf("task store: index/%s: %q is not a hash", id, clip(h))
	}
	return h, nil
}

// object loads objects/<hash>.
func (s Store) object(hash string) (*Task, error) {
	t, err := Load(filepath.Join(s.Dir, "objects", hash))
	if err != nil {
		return nil, fmt.Errorf("task store: %w", err)
	}
	return t, nil
}

// Get loads the task id names, checking that its files still hash to the
// name of their directory.
func (s Store) Get(id string) (*Task, error) {
	h, err := s.hashOf(id)
	if err != nil {
		return nil, err
	}
	t, err := s.object(h)
	if err != nil {
		return nil, err
	}
	if t.Hash != h {
		return nil, fmt.Errorf("task store: objects/%s: its files hash to %s; the store is damaged", short(h), short(t.Hash))
	}
	if t.Spec.ID != id {
		return nil, fmt.Errorf("task store: index/%s names a task with id %s; the store is damaged", id, t.Spec.ID)
	}
	return t, nil
}

// List loads every imported task, in id order.
func (s Store) List() ([]*Task, error) {
	entries, err := os.ReadDir(filepath.Join(s.Dir, "index"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("task store: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if CheckID(e.Name()) == nil && e.Type().IsRegular() {
			ids = append(ids, e.Name())
		}
	}
	sort.Strings(ids)
	list := make([]*Task, 0, len(ids))
	for _, id := range ids {
		t, err := s.Get(id)
		if err != nil {
			return nil, err
		}
		list = append(list, t)
	}
	return list, nil
}

// short is the first 12 hex digits of a hash, for messages.
func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

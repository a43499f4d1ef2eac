package tasks

import (
	"bytes"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The files of a task directory, relative to it (slash-separated).
const (
	FileSpec             = "task.yaml"
	FileDescription      = "description.md"
	FileLeaderboard      = "leaderboard.csv"
	DirPublic            = "public"
	DirPrivate           = "private"
	FileTrain            = "public/train.csv"
	FileTest             = "public/test.csv"
	FileSampleSubmission = "public/sample_submission.csv"
	FileAnswers          = "private/answers.csv"
)

// Bounds of a task directory.
const (
	MaxFiles       = 4096
	MaxBytes       = 1 << 30 // all files together
	maxSpecBytes   = 64 << 10
	maxDescription = 256 << 10
	maxNameLen     = 255
)

// Problem is one thing wrong with a task: the file (relative to the task
// directory), the field (a task.yaml field or a CSV column; may be
// empty), the line (0 when unknown) and what is wrong.
type Problem struct {
	File  string
	Field string
	Line  int
	Msg   string
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Field != "" {
		b.WriteString(": ")
		b.WriteString(p.Field)
	}
	if p.Line > 0 {
		fmt.Fprintf(&b, ": line %d", p.Line)
	}
	b.WriteString(": ")
	b.WriteString(p.Msg)
	return b.String()
}

// Invalid is a malformed task: every problem found.
type Invalid struct {
	Dir      string
	Problems []Problem
}

func (e *Invalid) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.String()
	}
	prefix := "invalid task"
	if e.Dir != "" {
		prefix += " " + e.Dir
	}
	return prefix + ": " + strings.Join(msgs, "; ")
}

// Task is a loaded, valid task.
type Task struct {
	Spec Spec `json:"spec"`
	// Dir is the directory the task was loaded from.
	Dir string `json:"dir"`
	// Hash is the SHA-256 (hex) of the task's files: their paths, sizes
	// and contents, in path order (see Hash).
	Hash        string `json:"hash"`
	Description string `json:"description"`
	// Leaderboard is the reference panel's scores, best first; empty
	// before the panel has run.
	Leaderboard []Entry `json:"leaderboard"`
	// TrainRows and TestRows count the rows of train.csv and test.csv;
	// Features the columns of test.csv other than the id.
	TrainRows int `json:"train_rows"`
	TestRows  int `json:"test_rows"`
	Features  int `json:"features"`
	// Files are the task's files, in path order.
	Files []File `json:"files"`
}

// Entry is one row of leaderboard.csv.
type Entry struct {
	Solution string  `json:"solution"`
	Score    float64 `json:"score"`
}

// File is one file of a task.
type File struct {
	Path   string `json:"path"` // slash-separated, relative to the task
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Hash is the hash of a task's files: SHA-256 over "path\x00size\x00sha256\n"
// of each file in path order.
func Hash(files []File) string {
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%d\x00%s\n", f.Path, f.Size, f.SHA256)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Load reads and checks the task in dir. A malformed task is an *Invalid
// naming each problem's file and field; an unreadable one an ordinary
// error.
func Load(dir string) (*Task, error) {
	l := loader{dir: dir, data: map[string][]byte{}}
	t, err := l.load()
	if err != nil {
		return nil, err
	}
	if len(l.problems) > 0 {
		return nil, &Invalid{Dir: dir, Problems: l.problems}
	}
	return t, nil
}

type loader struct {
	dir      string
	root     string            // dir, its symlinks resolved
	data     map[string][]byte // file contents by path
	files    []File
	problems []Problem
}

func (l *loader) bad(file, field string, line int, format string, args ...any) {
	l.problems = append(l.problems, Problem{File: file, Field: field, Line: line, Msg: fmt.Sprintf(format, args...)})
}

func (l *loader) load() (*Task, error) {
	// A symlink to the task directory is followed; symlinks inside it are
	// refused.
	if real, err := filepath.EvalSymlinks(l.dir); err == nil {
		l.root = real
	} else {
		l.root = l.dir
	}
	info, err := os.Stat(l.root)
	if err != nil {
		return nil, fmt.Errorf("task directory: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("task directory %s: not a directory", l.dir)
	}
	if err := l.walk(); err != nil {
		return nil, err
	}
	if len(l.problems) > 0 {
		return nil, nil
	}
	t := &Task{Dir: l.dir, Files: l.files, Hash: Hash(l.files)}
	for _, want := range []string{FileSpec, FileDescription, FileLeaderboard, FileTrain, FileTest, FileSampleSubmission, FileAnswers} {
		if _, ok := l.data[want]; !ok {
			l.bad(want, "", 0, "missing")
		}
	}
	if len(l.problems) > 0 {
		return nil, nil
	}
	spec, problems := parseSpec(l.data[FileSpec])
	l.problems = append(l.problems, problems...)
	if len(problems) > 0 {
		return nil, nil
	}
	t.Spec = spec
	t.Description = l.description()
	l.tables(t)
	t.Leaderboard = l.leaderboard(spec)
	return t, nil
}

// walk lists the directory: only the known top-level entries, regular
// files and directories, sane names, within the bounds. It reads every
// file and hashes it.
func (l *loader) walk() error {
	var total int64
	err := filepath.WalkDir(l.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == l.root {
			return nil
		}
		rel, err := filepath.Rel(l.root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if msg := checkName(d.Name()); msg != "" {
			l.bad(rel, "", 0, "%s", msg)
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		top, _, nested := strings.Cut(rel, "/")
		if !nested {
			switch {
			case top == DirPublic || top == DirPrivate:
				if !d.IsDir() {
					l.bad(rel, "", 0, "not a directory")
				}
				return nil
			case top == FileSpec || top == FileDescription || top == FileLeaderboard:
			default:
				l.bad(rel, "", 0, "unexpected entry (a task holds %s, %s, %s, %s/ and %s/)",
					FileSpec, FileDescription, FileLeaderboard, DirPublic, DirPrivate)
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			l.bad(rel, "", 0, "not a regular file (%v); symlinks and devices are refused", d.Type())
			return nil
		}
		if len(l.files) == MaxFiles {
			return fmt.Errorf("task directory %s: more than %d files", l.dir, MaxFiles)
		}
		if info, err := d.Info(); err == nil && info.Size() > MaxBytes-total {
			return fmt.Errorf("task directory %s: files larger than %d bytes together", l.dir, MaxBytes)
		}
		b, err := readMax(p, MaxBytes-total)
		if err != nil {
			return fmt.Errorf("task directory %s: %w", l.dir, err)
		}
		total += int64(len(b))
		sum := sha256.Sum256(b)
		l.files = append(l.files, File{Path: rel, Size: int64(len(b)), SHA256: hex.EncodeToString(sum[:])})
		l.data[rel] = b
		return nil
	})
	if err != nil {
		return err
	}
	sort.Slice(l.files, func(i, j int) bool { return l.files[i].Path < l.files[j].Path })
	return nil
}

// readMax reads at most max bytes of a file; a larger file is an error.
func readMax(p string, max int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("files larger than %d bytes together", MaxBytes)
	}
	return b, nil
}

// checkName refuses a file name that is hidden, overlong, or holds
// control characters or invalid UTF-8.
func checkName(name string) string {
	switch {
	case strings.HasPrefix(name, "."):
		return "hidden names (starting with '.') are refused"
	case len(name) > maxNameLen:
		return fmt.Sprintf("name of %d bytes, want at most %d", len(name), maxNameLen)
	case !utf8.ValidString(name):
		return "name is not UTF-8"
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || r == '\\' {
			return fmt.Sprintf("name holds %U", r)
		}
	}
	return ""
}

func (l *loader) description() string {
	b := l.data[FileDescription]
	switch {
	case len(b) > maxDescription:
		l.bad(FileDescription, "", 0, "%d bytes, want at most %d", len(b), maxDescription)
	case !utf8.Valid(b):
		l.bad(FileDescription, "", 0, "not UTF-8")
	case len(bytes.TrimSpace(b)) == 0:
		l.bad(FileDescription, "", 0, "empty")
	default:
		return string(b)
	}
	return ""
}

// table is a parsed CSV file.
type table struct {
	file   string
	header []string
	rows   [][]string
	lines  []int // line of each row
}

func (t *table) col(name string) int { return slices.Index(t.header, name) }

// readTable parses a CSV file: a header of distinct non-empty names, then
// rows of as many fields.
func (l *loader) readTable(file string) *table {
	b := l.data[file]
	if !utf8.Valid(b) {
		l.bad(file, "", 0, "not UTF-8")
		return nil
	}
	r := csv.NewReader(bytes.NewReader(b))
	r.ReuseRecord = false
	t := &table{file: file}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			line := 0
			if errors.As(err, &pe) {
				line = pe.Line
				err = pe.Err
			}
			l.bad(file, "", line, "%v", err)
			return nil
		}
		line, _ := r.FieldPos(0)
		if t.header == nil {
			t.header = rec
			continue
		}
		t.rows = append(t.rows, rec)
		t.lines = append(t.lines, line)
	}
	if t.header == nil {
		l.bad(file, "", 1, "empty; want a header line")
		return nil
	}
	seen := map[string]bool{}
	for _, h := range t.header {
		if strings.TrimSpace(h) == "" {
			l.bad(file, "", 1, "an empty column name")
			return nil
		}
		if seen[h] {
			l.bad(file, clip(h), 1, "repeated column")
			return nil
		}
		seen[h] = true
	}
	return t
}

// ids checks the id column of t (present, non-empty, distinct) and returns
// the ids in row order.
func (l *loader) ids(t *table, idCol string) []string {
	c := t.col(idCol)
	if c < 0 {
		l.bad(t.file, idCol, 1, "missing column (task.yaml id_column)")
		return nil
	}
	ids := make([]string, len(t.rows))
	seen := make(map[string]int, len(t.rows))
	for i, row := range t.rows {
		id := row[c]
		if id == "" {
			l.bad(t.file, idCol, t.lines[i], "empty id")
			return nil
		}
		if prev, dup := seen[id]; dup {
			l.bad(t.file, idCol, t.lines[i], "id %q repeated (first at line %d)", clip(id), prev)
			return nil
		}
		seen[id] = t.lines[i]
		ids[i] = id
	}
	return ids
}

// values checks the column col of t: each value an answer (asPrediction
// false) or a prediction of the task's kind and metric.
func (l *loader) values(t *table, s Spec, col string, asPrediction bool) {
	c := t.col(col)
	if c < 0 {
		l.bad(t.file, col, 1, "missing column (task.yaml target)")
		return
	}
	probability := asPrediction && s.Metric.Probability()
	for i, row := range t.rows {
		v := row[c]
		switch {
		case s.Kind == Classification && !probability:
			if !slices.Contains(s.Labels, v) {
				l.bad(t.file, col, t.lines[i], "%q is not one of the labels (%s)", clip(v), strings.Join(s.Labels, ", "))
				return
			}
		case probability:
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f >= 0 && f <= 1) {
				l.bad(t.file, col, t.lines[i], "%q: want the probability of %q, in [0, 1]", clip(v), s.Labels[1])
				return
			}
		default:
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				l.bad(t.file, col, t.lines[i], "%q: want a finite number", clip(v))
				return
			}
		}
	}
}

// tables checks the CSV files against each other: train has the id and
// target columns; test the same columns less the target (the answers are
// private); answers and the sample submission exactly the id and target,
// for the test ids in test order.
func (l *loader) tables(t *Task) {
	s := t.Spec
	train, test := l.readTable(FileTrain), l.readTable(FileTest)
	answers, sample := l.readTable(FileAnswers), l.readTable(FileSampleSubmission)
	if train != nil {
		l.ids(train, s.IDColumn)
		l.values(train, s, s.Target, false)
		if len(train.rows) == 0 {
			l.bad(FileTrain, "", 0, "no rows")
		}
		t.TrainRows = len(train.rows)
	}
	var testIDs []string
	if test != nil {
		testIDs = l.ids(test, s.IDColumn)
		if test.col(s.Target) >= 0 {
			l.bad(FileTest, s.Target, 1, "the target column is the answer; it belongs in %s", FileAnswers)
		}
		if len(test.rows) == 0 {
			l.bad(FileTest, "", 0, "no rows")
		}
		t.TestRows = len(test.rows)
		t.Features = len(test.header) - 1
	}
	if train != nil && test != nil {
		want := slices.DeleteFunc(slices.Clone(train.header), func(h string) bool { return h == s.Target })
		if !slices.Equal(want, test.header) {
			l.bad(FileTest, "", 1, "columns %s differ from %s's less the target (%s)",
				clip(strings.Join(test.header, ",")), FileTrain, clip(strings.Join(want, ",")))
		}
	}
	for _, x := range []*table{answers, sample} {
		if x == nil {
			continue
		}
		if !slices.Equal(x.header, []string{s.IDColumn, s.Target}) {
			l.bad(x.file, "", 1, "columns %s, want %s,%s", clip(strings.Join(x.header, ",")), s.IDColumn, s.Target)
			continue
		}
		ids := l.ids(x, s.IDColumn)
		l.values(x, s, s.Target, x == sample)
		if test == nil || testIDs == nil || ids == nil {
			continue
		}
		if len(ids) != len(testIDs) {
			l.bad(x.file, "", 0, "%d rows, want one per row of %s (%d)", len(ids), FileTest, len(testIDs))
			continue
		}
		for i := range ids {
			if ids[i] != testIDs[i] {
				l.bad(x.file, s.IDColumn, x.lines[i], "id %q where %s has %q: want the test ids in test order", clip(ids[i]), FileTest, clip(testIDs[i]))
				break
			}
		}
	}
}

// leaderboard checks leaderboard.csv: a header solution,score, then one
// row per reference solution, names distinct, scores finite, best first.
func (l *loader) leaderboard(s Spec) []Entry {
	t := l.readTable(FileLeaderboard)
	if t == nil {
		return nil
	}
	if !slices.Equal(t.header, []string{"solution", "score"}) {
		l.bad(FileLeaderboard, "", 1, "columns %s, want solution,score", clip(strings.Join(t.header, ",")))
		return nil
	}
	entries := make([]Entry, 0, len(t.rows))
	seen := map[string]bool{}
	for i, row := range t.rows {
		name, line := row[0], t.lines[i]
		if err := CheckID(name); err != nil {
			l.bad(FileLeaderboard, "solution", line, "%v", err)
			return nil
		}
		if seen[name] {
			l.bad(FileLeaderboard, "solution", line, "%q repeated", name)
			return nil
		}
		seen[name] = true
		f, err := strconv.ParseFloat(row[1], 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			l.bad(FileLeaderboard, "score", line, "%q: want a finite number", clip(row[1]))
			return nil
		}
		if n := len(entries); n > 0 && s.Direction.Better(f, entries[n-1].Score) {
			l.bad(FileLeaderboard, "score", line, "%v is better than the row above (%v); want best first (%s)", f, entries[n-1].Score, s.Direction)
			return nil
		}
		entries = append(entries, Entry{Solution: name, Score: f})
	}
	return entries
}

// Path is the file of t at rel (slash-separated).
func (t *Task) Path(rel string) string {
	return filepath.Join(t.Dir, filepath.FromSlash(path.Clean(rel)))
}

package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/wmrl/wmrl/internal/diskspace"
)

// Checkpoint encoding, all integers and floats little-endian:
//
//	magic    8 bytes "WMRLPOLC"
//	version  uint32  (FormatVersion)
//	length   uint64  payload length in bytes
//	payload:
//	  step, init seed                         uint64 ×2
//	  vocab_size, card_dim, max_len, hidden   uint64 ×4
//	  learning_rate, beta1, beta2, adam_eps,
//	  kl_coef, clip_norm, init_scale,
//	  simple_bias                             float64 ×8
//	  vocabulary fingerprint                  32 bytes
//	  n                                       uint64 (parameter count)
//	  parameters, Adam m, Adam v, reference   float64 ×n each
//	sha256   32 bytes over everything above
//
// The policy's hash is the hex of that sha256.
const (
	magic = "WMRLPOLC"
	// FormatVersion is the checkpoint format written by Encode.
	FormatVersion = 1
	headerLen     = 8 + 4 + 8
	fixedPayload  = 8*2 + 8*4 + 8*8 + 32 + 8
)

// Encode returns the checkpoint bytes of p, a deterministic function of its
// state.
func (p *Policy) Encode() []byte {
	n := p.l.n
	payload := fixedPayload + 4*8*n
	buf := make([]byte, 0, headerLen+payload+sha256.Size)
	le := binary.LittleEndian
	buf = append(buf, magic...)
	buf = le.AppendUint32(buf, FormatVersion)
	buf = le.AppendUint64(buf, uint64(payload))
	buf = le.AppendUint64(buf, p.step)
	buf = le.AppendUint64(buf, p.initSeed)
	c := p.cfg
	for _, x := range []int{c.VocabSize, c.CardDim, c.MaxLen, c.Hidden} {
		buf = le.AppendUint64(buf, uint64(x))
	}
	for _, x := range []float64{c.LearningRate, c.Beta1, c.Beta2, c.AdamEps, c.KLCoef, c.ClipNorm, c.InitScale, c.SimpleBias} {
		buf = le.AppendUint64(buf, math.Float64bits(x))
	}
	buf = append(buf, p.vocab[:]...)
	buf = le.AppendUint64(buf, uint64(n))
	for _, xs := range [][]float64{p.theta, p.m, p.v, p.ref} {
		for _, x := range xs {
			buf = le.AppendUint64(buf, math.Float64bits(x))
		}
	}
	sum := sha256.Sum256(buf)
	return append(buf, sum[:]...)
}

// Hash returns the policy's content hash: the hex sha256 that ends its
// encoding. Equal hashes mean equal parameters, optimiser state, step and
// configuration.
func (p *Policy) Hash() string {
	b := p.Encode()
	return hex.EncodeToString(b[len(b)-sha256.Size:])
}

// ErrCorrupt is wrapped by every error about a checkpoint's bytes (bad magic,
// unknown version, wrong length, hash mismatch, inconsistent contents).
var ErrCorrupt = errors.New("corrupt checkpoint")

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// Decode parses checkpoint bytes for grammar g. It verifies the magic, the
// format version, the length and the sha256 before reading anything else,
// and refuses a checkpoint whose vocabulary differs from g's.
func Decode(data []byte, g Grammar) (*Policy, error) {
	le := binary.LittleEndian
	if len(data) < headerLen {
		return nil, corrupt("truncated: %d bytes, the header alone needs %d", len(data), headerLen)
	}
	if string(data[:8]) != magic {
		return nil, corrupt("bad magic %q, want %q", data[:8], magic)
	}
	if v := le.Uint32(data[8:12]); v != FormatVersion {
		return nil, corrupt("format version %d, want %d", v, FormatVersion)
	}
	plen := le.Uint64(data[12:20])
	if plen > uint64(len(data)) {
		return nil, corrupt("truncated: header announces a %d-byte payload, file has %d bytes", plen, len(data))
	}
	want := headerLen + int(plen) + sha256.Size
	switch {
	case len(data) < want:
		return nil, corrupt("truncated: %d bytes, want %d", len(data), want)
	case len(data) > want:
		return nil, corrupt("%d trailing bytes after the checkpoint", len(data)-want)
	}
	body := data[:want-sha256.Size]
	sum := sha256.Sum256(body)
	if !bytes.Equal(sum[:], data[want-sha256.Size:]) {
		return nil, corrupt("sha256 mismatch: stored %x, content %x", data[want-sha256.Size:], sum)
	}
	if plen < fixedPayload {
		return nil, corrupt("payload %d bytes, want at least %d", plen, fixedPayload)
	}
	r := body[headerLen:]
	u64 := func() uint64 { x := le.Uint64(r); r = r[8:]; return x }
	f64 := func() float64 { return math.Float64frombits(u64()) }
	p := &Policy{step: u64(), initSeed: u64()}
	var dims [4]uint64
	for i := range dims {
		dims[i] = u64()
		if dims[i] > maxDim {
			return nil, corrupt("dimension %d is %d, above %d", i, dims[i], maxDim)
		}
	}
	cfg := Config{VocabSize: int(dims[0]), CardDim: int(dims[1]), MaxLen: int(dims[2]), Hidden: int(dims[3])}
	cfg.LearningRate, cfg.Beta1, cfg.Beta2, cfg.AdamEps = f64(), f64(), f64(), f64()
	cfg.KLCoef, cfg.ClipNorm, cfg.InitScale, cfg.SimpleBias = f64(), f64(), f64(), f64()
	if err := cfg.Validate(); err != nil {
		return nil, corrupt("config: %v", err)
	}
	copy(p.vocab[:], r[:32])
	r = r[32:]
	p.cfg, p.l = cfg, newLayout(cfg)
	n := u64()
	if n != uint64(p.l.n) {
		return nil, corrupt("%d parameters, config implies %d", n, p.l.n)
	}
	if plen != uint64(fixedPayload+4*8*p.l.n) {
		return nil, corrupt("payload %d bytes, config implies %d", plen, fixedPayload+4*8*p.l.n)
	}
	vec := func() []float64 {
		xs := make([]float64, p.l.n)
		for i := range xs {
			xs[i] = f64()
		}
		return xs
	}
	p.theta, p.m, p.v, p.ref = vec(), vec(), vec(), vec()
	if err := checkGrammar(g, cfg); err != nil {
		return nil, err
	}
	if vocabHash(g.Vocab()) != p.vocab {
		return nil, errors.New("grammar vocabulary differs from the checkpoint's")
	}
	p.g = g
	return p, nil
}

// FileName is the checkpoint file name for a step: policy-<step, 8 digits>.ckpt.
func FileName(step uint64) string { return fmt.Sprintf("policy-%08d.ckpt", step) }

// Save writes p's checkpoint to dir/FileName(p.Step()) atomically (a
// temporary file in dir, synced, then renamed) and returns its path.
func (p *Policy) Save(dir string) (string, error) {
	path := filepath.Join(dir, FileName(p.step))
	if err := writeAtomic(path, p.Encode()); err != nil {
		return "", fmt.Errorf("save checkpoint %s: %w", path, err)
	}
	return path, nil
}

// writeAtomic writes data to path: a synced temporary file renamed into
// place. A full or read-only file system's error names the space left
// (diskspace.Annotate).
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return diskspace.Annotate(err, path)
	}
	tmp := f.Name()
	_, err = f.Write(data)
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
		os.Remove(tmp)
		return diskspace.Annotate(err, path)
	}
	// Make the rename durable; not every platform can sync a directory.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// Load reads and verifies the checkpoint at path for grammar g. A corrupted
// or truncated file is refused with an error naming the file (wrapping
// ErrCorrupt).
func Load(path string, g Grammar) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load checkpoint %s: %w", path, err)
	}
	p, err := Decode(data, g)
	if err != nil {
		return nil, fmt.Errorf("load checkpoint %s: %w", path, err)
	}
	return p, nil
}

// Latest returns the path and step of the highest-step checkpoint in dir;
// found is false when dir holds none.
func Latest(dir string) (path string, step uint64, found bool, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", 0, false, fmt.Errorf("list checkpoints in %s: %w", dir, err)
	}
	for _, e := range entries {
		name := e.Name()
		digits, ok := strings.CutPrefix(name, "policy-")
		if !ok || e.IsDir() {
			continue
		}
		digits, ok = strings.CutSuffix(digits, ".ckpt")
		if !ok {
			continue
		}
		s, perr := strconv.ParseUint(digits, 10, 64)
		if perr != nil || FileName(s) != name {
			continue
		}
		if !found || s > step {
			path, step, found = filepath.Join(dir, name), s, true
		}
	}
	return path, step, found, nil
}

// Package tokenizer turns text into a model's token ids and back, from the
// model's own tokenizer.json (the Hugging Face tokenizers format), so that a
// remote policy (the Tinker training API) is given the very ids its model
// was trained with. It reads the byte-level BPE tokenizers of the GPT-2,
// Llama 3 and Qwen families:
//
//   - normalizer: none, NFC, or a Sequence of those;
//   - pre_tokenizer: Split (a regex, behaviour Isolated or Removed, not
//     inverted), ByteLevel (with or without its own GPT-2 regex and prefix
//     space), or a Sequence of those;
//   - model: BPE with a vocab and merges (either "a b" strings or [a, b]
//     pairs), ignore_merges honoured, no byte fallback, no dropout;
//   - decoder: ByteLevel (or none);
//   - added_tokens: matched verbatim before anything else, longest first.
//
// Anything else is refused when the file is loaded, with the field named
// (for instance `pre_tokenizer.type: "Metaspace" is not supported`), never
// silently tokenised differently from the model. The split patterns use
// lookahead (`\s+(?!\S)`), which Go's regexp lacks, so they are compiled
// with github.com/dlclark/regexp2.
//
// Bytes is the fallback for a model that has no tokenizer.json here: every
// UTF-8 byte of the text is one token id (0-255).
package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
	"golang.org/x/text/unicode/norm"
)

// Tokenizer encodes text to token ids and decodes ids to text. Both are
// safe for concurrent use.
type Tokenizer interface {
	Encode(text string) ([]int, error)
	Decode(ids []int) (string, error)
}

// Bytes is the byte tokenizer: token i is byte i.
type Bytes struct{}

// Encode returns the bytes of text.
func (Bytes) Encode(text string) ([]int, error) {
	out := make([]int, len(text))
	for i := 0; i < len(text); i++ {
		out[i] = int(text[i])
	}
	return out, nil
}

// Decode returns the text of byte ids; an id outside 0-255 is an error.
func (Bytes) Decode(ids []int) (string, error) {
	b := make([]byte, len(ids))
	for i, id := range ids {
		if id < 0 || id > 255 {
			return "", fmt.Errorf("token %d: id %d is not a byte", i, id)
		}
		b[i] = byte(id)
	}
	return string(b), nil
}

// gpt2Pattern is the ByteLevel pre-tokenizer's own split (use_regex).
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// BPE is a byte-level BPE tokenizer read from a tokenizer.json.
type BPE struct {
	nfc          bool
	splits       []split
	prefixSpace  bool
	vocab        map[string]int
	tokens       map[int]string // id -> token, for Decode
	ranks        map[[2]string]int
	ignoreMerges bool
	added        []addedToken // longest first
	addedByID    map[int]string

	mu    sync.Mutex
	cache map[string][]int // word -> ids
}

type split struct {
	re     *regexp2.Regexp
	remove bool // behaviour Removed: the matches are dropped
}

type addedToken struct {
	content string
	id      int
}

// file is the part of tokenizer.json this package reads.
type file struct {
	AddedTokens []struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
	} `json:"added_tokens"`
	Normalizer   json.RawMessage `json:"normalizer"`
	PreTokenizer json.RawMessage `json:"pre_tokenizer"`
	Decoder      json.RawMessage `json:"decoder"`
	Model        struct {
		Type         string          `json:"type"`
		Vocab        map[string]int  `json:"vocab"`
		Merges       json.RawMessage `json:"merges"`
		IgnoreMerges bool            `json:"ignore_merges"`
		ByteFallback bool            `json:"byte_fallback"`
		Dropout      *float64        `json:"dropout"`
		UnkToken     *string         `json:"unk_token"`
	} `json:"model"`
}

type component struct {
	Type          string          `json:"type"`
	Normalizers   json.RawMessage `json:"normalizers"`
	Pretokenizers json.RawMessage `json:"pretokenizers"`
	Pattern       struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Behavior       string `json:"behavior"`
	Invert         bool   `json:"invert"`
	AddPrefixSpace bool   `json:"add_prefix_space"`
	UseRegex       *bool  `json:"use_regex"`
}

// Load reads a tokenizer.json; errors name the file and the field.
func Load(path string) (*BPE, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", path, err)
	}
	return t, nil
}

// Parse reads the contents of a tokenizer.json.
func Parse(b []byte) (*BPE, error) {
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("not a tokenizer.json: %w", err)
	}
	t := &BPE{vocab: f.Model.Vocab, ignoreMerges: f.Model.IgnoreMerges, cache: map[string][]int{}}
	switch {
	case f.Model.Type != "BPE":
		return nil, fmt.Errorf("model.type: %q is not supported (only BPE)", f.Model.Type)
	case f.Model.ByteFallback:
		return nil, errors.New("model.byte_fallback: true is not supported")
	case f.Model.Dropout != nil && *f.Model.Dropout != 0:
		return nil, errors.New("model.dropout: not supported")
	case len(f.Model.Vocab) == 0:
		return nil, errors.New("model.vocab: empty")
	}
	if err := t.normalizer(f.Normalizer, "normalizer"); err != nil {
		return nil, err
	}
	if err := t.preTokenizer(f.PreTokenizer, "pre_tokenizer"); err != nil {
		return nil, err
	}
	if err := checkDecoder(f.Decoder); err != nil {
		return nil, err
	}
	merges, err := parseMerges(f.Model.Merges)
	if err != nil {
		return nil, err
	}
	t.ranks = make(map[[2]string]int, len(merges))
	for i, m := range merges {
		if _, ok := t.vocab[m[0]+m[1]]; !ok {
			return nil, fmt.Errorf("model.merges[%d]: %q + %q makes a token not in model.vocab", i, m[0], m[1])
		}
		if _, dup := t.ranks[m]; !dup {
			t.ranks[m] = i
		}
	}
	t.tokens = make(map[int]string, len(t.vocab))
	for tok, id := range t.vocab {
		t.tokens[id] = tok
	}
	t.addedByID = map[int]string{}
	for i, a := range f.AddedTokens {
		if a.Content == "" {
			return nil, fmt.Errorf("added_tokens[%d]: empty content", i)
		}
		t.added = append(t.added, addedToken{content: a.Content, id: a.ID})
		t.addedByID[a.ID] = a.Content
	}
	sort.SliceStable(t.added, func(i, j int) bool { return len(t.added[i].content) > len(t.added[j].content) })
	return t, nil
}

func (t *BPE) normalizer(raw json.RawMessage, field string) error {
	if isNull(raw) {
		return nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	switch c.Type {
	case "NFC":
		t.nfc = true
	case "Sequence":
		var list []json.RawMessage
		if err := json.Unmarshal(c.Normalizers, &list); err != nil {
			return fmt.Errorf("%s.normalizers: %w", field, err)
		}
		for i, n := range list {
			if err := t.normalizer(n, fmt.Sprintf("%s.normalizers[%d]", field, i)); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("%s.type: %q is not supported (NFC, Sequence)", field, c.Type)
	}
	return nil
}

func (t *BPE) preTokenizer(raw json.RawMessage, field string) error {
	if isNull(raw) {
		return nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	switch c.Type {
	case "Sequence":
		var list []json.RawMessage
		if err := json.Unmarshal(c.Pretokenizers, &list); err != nil {
			return fmt.Errorf("%s.pretokenizers: %w", field, err)
		}
		for i, p := range list {
			if err := t.preTokenizer(p, fmt.Sprintf("%s.pretokenizers[%d]", field, i)); err != nil {
				return err
			}
		}
	case "Split":
		if c.Invert {
			return fmt.Errorf("%s.invert: true is not supported", field)
		}
		var pattern string
		switch {
		case c.Pattern.Regex != nil:
			pattern = *c.Pattern.Regex
		case c.Pattern.String != nil:
			pattern = regexp2.Escape(*c.Pattern.String)
		default:
			return fmt.Errorf("%s.pattern: want Regex or String", field)
		}
		if c.Behavior != "Isolated" && c.Behavior != "Removed" {
			return fmt.Errorf("%s.behavior: %q is not supported (Isolated, Removed)", field, c.Behavior)
		}
		re, err := regexp2.Compile(pattern, regexp2.Unicode)
		if err != nil {
			return fmt.Errorf("%s.pattern: %w", field, err)
		}
		t.splits = append(t.splits, split{re: re, remove: c.Behavior == "Removed"})
	case "ByteLevel":
		t.prefixSpace = c.AddPrefixSpace
		if c.UseRegex == nil || *c.UseRegex {
			t.splits = append(t.splits, split{re: regexp2.MustCompile(gpt2Pattern, regexp2.Unicode)})
		}
	default:
		return fmt.Errorf("%s.type: %q is not supported (Split, ByteLevel, Sequence)", field, c.Type)
	}
	return nil
}

func checkDecoder(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("decoder: %w", err)
	}
	if c.Type != "ByteLevel" {
		return fmt.Errorf("decoder.type: %q is not supported (ByteLevel)", c.Type)
	}
	return nil
}

func isNull(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "" || s == "null"
}

// parseMerges reads merges as "a b" strings or [a, b] pairs.
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	var strs []string
	if err := json.Unmarshal(raw, &strs); err == nil {
		out := make([][2]string, len(strs))
		for i, s := range strs {
			a, b, ok := strings.Cut(s, " ")
			if !ok || a == "" || b == "" || strings.Contains(b, " ") {
				return nil, fmt.Errorf("model.merges[%d]: %q is not two tokens", i, s)
			}
			out[i] = [2]string{a, b}
		}
		return out, nil
	}
	var pairs [][]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, fmt.Errorf("model.merges: want strings or pairs: %w", err)
	}
	out := make([][2]string, len(pairs))
	for i, p := range pairs {
		if len(p) != 2 || p[0] == "" || p[1] == "" {
			return nil, fmt.Errorf("model.merges[%d]: %q is not two tokens", i, p)
		}
		out[i] = [2]string{p[0], p[1]}
	}
	return out, nil
}

// Encode returns the token ids of text, without special tokens around it
// (a chat template's tokens are part of the text, as added tokens).
func (t *BPE) Encode(text string) ([]int, error) {
	var out []int
	for _, chunk := range t.splitAdded(text) {
		if chunk.id >= 0 {
			out = append(out, chunk.id)
			continue
		}
		ids, err := t.encodeChunk(chunk.text)
		if err != nil {
			return nil, err
		}
		out = append(out, ids...)
	}
	return out, nil
}

type chunk struct {
	text string
	id   int // an added token's id, or -1
}

// splitAdded cuts text at the added tokens, leftmost first, longest at a
// position.
func (t *BPE) splitAdded(text string) []chunk {
	var out []chunk
	start := 0
	for i := 0; i < len(text); {
		matched := false
		for _, a := range t.added {
			if strings.HasPrefix(text[i:], a.content) {
				if start < i {
					out = append(out, chunk{text: text[start:i], id: -1})
				}
				out = append(out, chunk{id: a.id})
				i += len(a.content)
				start, matched = i, true
				break
			}
		}
		if !matched {
			i++
		}
	}
	if start < len(text) {
		out = append(out, chunk{text: text[start:], id: -1})
	}
	return out
}

func (t *BPE) encodeChunk(text string) ([]int, error) {
	if t.nfc {
		text = norm.NFC.String(text)
	}
	if t.prefixSpace && !strings.HasPrefix(text, " ") {
		text = " " + text
	}
	pieces := []string{text}
	for _, s := range t.splits {
		var next []string
		for _, p := range pieces {
			ps, err := s.apply(p)
			if err != nil {
				return nil, err
			}
			next = append(next, ps...)
		}
		pieces = next
	}
	var out []int
	for _, p := range pieces {
		ids, err := t.word(byteLevel(p))
		if err != nil {
			return nil, err
		}
		out = append(out, ids...)
	}
	return out, nil
}

// apply splits s at the pattern's matches: matches and the text between
// them are pieces (Isolated), or the matches are dropped (Removed).
func (s split) apply(text string) ([]string, error) {
	var out []string
	last := 0
	m, err := s.re.FindStringMatch(text)
	for ; m != nil && err == nil; m, err = s.re.FindNextMatch(m) {
		i, n := m.ByteRange()
		if n == 0 {
			continue
		}
		if last < i {
			out = append(out, text[last:i])
		}
		if !s.remove {
			out = append(out, text[i:i+n])
		}
		last = i + n
	}
	if err != nil {
		return nil, fmt.Errorf("pre-tokenize: %w", err)
	}
	if last < len(text) {
		out = append(out, text[last:])
	}
	return out, nil
}

// word applies the merges to one pre-tokenized word (byte-level mapped).
func (t *BPE) word(w string) ([]int, error) {
	t.mu.Lock()
	ids, ok := t.cache[w]
	t.mu.Unlock()
	if ok {
		return ids, nil
	}
	if id, ok := t.vocab[w]; ok && (t.ignoreMerges || utf8.RuneCountInString(w) == 1) {
		return []int{id}, nil
	}
	parts := make([]string, 0, len(w))
	for _, r := range w {
		parts = append(parts, string(r))
	}
	for len(parts) > 1 {
		best, at := -1, -1
		for i := 0; i+1 < len(parts); i++ {
			if r, ok := t.ranks[[2]string{parts[i], parts[i+1]}]; ok && (best < 0 || r < best) {
				best, at = r, i
			}
		}
		if at < 0 {
			break
		}
		// Merge every occurrence of the best pair, left to right.
		pair := [2]string{parts[at], parts[at+1]}
		merged := parts[:0:0]
		for i := 0; i < len(parts); i++ {
			if i+1 < len(parts) && parts[i] == pair[0] && parts[i+1] == pair[1] {
				merged = append(merged, pair[0]+pair[1])
				i++
				continue
			}
			merged = append(merged, parts[i])
		}
		parts = merged
	}
	ids = make([]int, len(parts))
	for i, p := range parts {
		id, ok := t.vocab[p]
		if !ok {
			return nil, fmt.Errorf("token %q is not in the vocabulary", p)
		}
		ids[i] = id
	}
	t.mu.Lock()
	if len(t.cache) < 1<<16 {
		t.cache[w] = slices.Clone(ids)
	}
	t.mu.Unlock()
	return ids, nil
}

// Decode returns the text of ids: byte-level tokens back to their bytes,
// added tokens verbatim; bytes that are not valid UTF-8 become U+FFFD, as
// the Hugging Face decoder does. An unknown id is an error.
func (t *BPE) Decode(ids []int) (string, error) {
	var sb strings.Builder
	var pending []byte
	flush := func() {
		sb.WriteString(strings.ToValidUTF8(string(pending), "\uFFFD"))
		pending = pending[:0]
	}
	for i, id := range ids {
		if a, ok := t.addedByID[id]; ok {
			flush()
			sb.WriteString(a)
			continue
		}
		tok, ok := t.tokens[id]
		if !ok {
			return "", fmt.Errorf("token %d: id %d is not in the vocabulary", i, id)
		}
		for _, r := range tok {
			b, ok := unicodeToByte[r]
			if !ok {
				return "", fmt.Errorf("token %d: %q is not a byte-level token", i, tok)
			}
			pending = append(pending, b)
		}
	}
	flush()
	return sb.String(), nil
}

// byteToUnicode is GPT-2's map of the 256 bytes to printable runes: the
// printable Latin-1 bytes map to themselves, the others to 256, 257, ...
var byteToUnicode, unicodeToByte = byteMaps()

func byteMaps() ([256]rune, map[rune]byte) {
	var fwd [256]rune
	back := make(map[rune]byte, 256)
	n := 0
	for b := 0; b < 256; b++ {
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		r := rune(b)
		if !printable {
			r = rune(256 + n)
			n++
		}
		fwd[b] = r
		back[r] = byte(b)
	}
	return fwd, back
}

// byteLevel maps the bytes of s to their runes.
func byteLevel(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		sb.WriteRune(byteToUnicode[s[i]])
	}
	return sb.String()
}

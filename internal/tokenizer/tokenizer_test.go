package tokenizer

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// qwenPattern is the split pattern of the Qwen2/Qwen3 tokenizers.
const qwenPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// testFile is a small tokenizer.json laid out as Qwen's: the 256 byte
// tokens (id = byte), a few merges, two added tokens.
func testFile(t testing.TB, edit func(map[string]any)) []byte {
	t.Helper()
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[string(byteToUnicode[b])] = b
	}
	merges := [][2]string{{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"Ġ", "w"}, {"hell", "o"}, {"Ġw", "o"}, {"Ġ", "b"}}
	for i, m := range merges {
		vocab[m[0]+m[1]] = 256 + i
	}
	f := map[string]any{
		"version": "1.0",
		"added_tokens": []map[string]any{
			{"id": 1000, "content": "<|im_start|>", "special": true},
			{"id": 1001, "content": "<|im_end|>", "special": true},
		},
		"normalizer": map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": qwenPattern}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		}},
		"decoder": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		"model": map[string]any{"type": "BPE", "vocab": vocab, "merges": merges, "ignore_merges": false,
			"byte_fallback": false, "dropout": nil, "unk_token": nil},
	}
	if edit != nil {
		edit(f)
	}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustParse(t *testing.T, b []byte) *BPE {
	t.Helper()
	tk, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// Hand-worked encodings: the merges apply by rank, the split pattern's
// lookahead leaves the last space of a run to the next word, added tokens
// are matched whole.
func TestEncodeByHand(t *testing.T) {
	tk := mustParse(t, testFile(t, nil))
	for _, tt := range []struct {
		give string
		want []int
	}{
		// h e l l o -> he l l o -> he ll o -> hell o -> hello (260)
		{"hello", []int{260}},
		// " world": Ġ w o r l d -> Ġw o r l d -> Ġwo r l d
		{"hello world", []int{260, 261, 'r', 'l', 'd'}},
		// "a  b": "a", " " (\s+(?!\S) leaves the last space to " b"), " b"
		// -> Ġb (262); without the lookahead "  " would take both.
		{"a  b", []int{'a', ' ', 262}},
		{"<|im_start|>hello<|im_end|>", []int{1000, 260, 1001}},
		// "é" is two bytes, C3 A9, each its own token.
		{"é", []int{0xC3, 0xA9}},
		// NFC: e + combining acute is normalised to é first.
		{"e\u0301", []int{0xC3, 0xA9}},
	} {
		got, err := tk.Encode(tt.give)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("Encode(%q) = %v, %v, want %v", tt.give, got, err, tt.want)
		}
	}
}

// Decoding what was encoded gives the (normalised) text back, whatever it
// holds; bytes that are not UTF-8 decode to U+FFFD.
func TestRoundTrip(t *testing.T) {
	tk := mustParse(t, testFile(t, nil))
	for _, s := range []string{"", "hello world", "def f(x):\n\treturn x**2  # 平方\n", "<|im_start|>user\nhi<|im_end|>\n",
		"  leading and trailing  ", "tabs\t\tand\r\nCRLF", "emoji 🙂 and ÿ"} {
		ids, err := tk.Encode(s)
		if err != nil {
			t.Fatalf("Encode(%q): %v", s, err)
		}
		back, err := tk.Decode(ids)
		if err != nil || back != s {
			t.Errorf("Decode(Encode(%q)) = %q, %v", s, back, err)
		}
	}
	got, err := tk.Decode([]int{'a', 0xE4})
	if err != nil || got != "a\uFFFD" {
		t.Errorf("Decode of a cut UTF-8 sequence = %q, %v", got, err)
	}
	if _, err := tk.Decode([]int{5000}); err == nil || !strings.Contains(err.Error(), "5000") {
		t.Errorf("Decode of an unknown id: %v", err)
	}
}

func FuzzRoundTrip(f *testing.F) {
	f.Add("hello world")
	f.Add("x  \n\n y<|im_end|>")
	tk, err := Parse(testFile(f, nil))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		ids, err := tk.Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		back, err := tk.Decode(ids)
		if err != nil {
			t.Fatal(err)
		}
		// Text is normalised (NFC) before it is split; added tokens are
		// cut out first, so normalise around them the same way.
		var want strings.Builder
		for _, c := range tk.splitAdded(s) {
			if c.id >= 0 {
				want.WriteString(tk.addedByID[c.id])
			} else {
				want.WriteString(norm.NFC.String(c.text))
			}
		}
		if back != want.String() {
			t.Fatalf("round trip of %q = %q, want %q", s, back, want.String())
		}
	})
}

// The GPT-2 layout: ByteLevel does its own split and adds a prefix space;
// merges given as "a b" strings.
func TestGPT2Layout(t *testing.T) {
	tk := mustParse(t, testFile(t, func(f map[string]any) {
		f["normalizer"] = nil
		f["pre_tokenizer"] = map[string]any{"type": "ByteLevel", "add_prefix_space": true, "use_regex": true}
		m := f["model"].(map[string]any)
		var strs []string
		for _, p := range m["merges"].([][2]string) {
			strs = append(strs, p[0]+" "+p[1])
		}
		m["merges"] = strs
	}))
	got, err := tk.Encode("world")
	if want := []int{261, 'r', 'l', 'd'}; err != nil || !slices.Equal(got, want) {
		t.Errorf("Encode(world) with a prefix space = %v, %v, want %v", got, err, want)
	}
}

// A tokenizer this package cannot reproduce is refused, naming the field.
func TestRefusesWhatItCannotReproduce(t *testing.T) {
	for _, tt := range []struct {
		edit func(map[string]any)
		want string
	}{
		{func(f map[string]any) { f["pre_tokenizer"] = map[string]any{"type": "Metaspace"} }, `pre_tokenizer.type: "Metaspace" is not supported`},
		{func(f map[string]any) { f["model"].(map[string]any)["type"] = "WordPiece" }, `model.type: "WordPiece"`},
		{func(f map[string]any) { f["model"].(map[string]any)["byte_fallback"] = true }, "model.byte_fallback"},
		{func(f map[string]any) { f["normalizer"] = map[string]any{"type": "Lowercase"} }, `normalizer.type: "Lowercase"`},
		{func(f map[string]any) { f["decoder"] = map[string]any{"type": "WordPiece"} }, "decoder.type"},
		{func(f map[string]any) { f["model"].(map[string]any)["merges"] = []string{"h e", "x"} }, `model.merges[1]: "x"`},
		{func(f map[string]any) { f["model"].(map[string]any)["merges"] = []string{"q z"} }, `model.merges[0]: "q" + "z"`},
		{func(f map[string]any) {
			f["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[0].(map[string]any)["pattern"] = map[string]any{"Regex": "(unclosed"}
		}, "pre_tokenizer.pretokenizers[0].pattern"},
	} {
		_, err := Parse(testFile(t, tt.edit))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse = %v, want an error with %q", err, tt.want)
		}
	}
}

func TestBytes(t *testing.T) {
	ids, _ := Bytes{}.Encode("hé")
	if !slices.Equal(ids, []int{'h', 0xC3, 0xA9}) {
		t.Errorf("Bytes.Encode = %v", ids)
	}
	if s, err := (Bytes{}).Decode(ids); err != nil || s != "hé" {
		t.Errorf("Bytes.Decode = %q, %v", s, err)
	}
	if _, err := (Bytes{}).Decode([]int{256}); err == nil {
		t.Error("Bytes.Decode(256) did not fail")
	}
}

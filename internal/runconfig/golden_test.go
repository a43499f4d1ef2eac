package runconfig

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the current encoding")

// TestJSONGolden checks that the JSON encoding of every preset is the one
// recorded in testdata/golden: Config is part of every workflow's input, so
// recorded histories decode only while its JSON field names and shapes stay
// the same. The golden files were captured before the domain sections were
// embedded; regenerate them (-update) only for a deliberate change of the
// encoding, with a workflow version for it. The experiments of docs/results
// check that their YAML names still parse to the same values.
func TestJSONGolden(t *testing.T) {
	give := map[string]func() (Config, error){"default": func() (Config, error) { return Default(), nil }}
	for _, name := range PresetNames() {
		give["preset-"+name] = func() (Config, error) { return Preset(name) }
	}
	for _, name := range BenchPresetNames() {
		give["bench-"+name] = func() (Config, error) { return BenchPreset(name) }
	}
	ratio := 0.5
	give["max_ungraded"] = func() (Config, error) {
		c := Default()
		c.MaxUngraded, c.Sandbox.RetryHours = &ratio, 2
		return c, nil
	}
	// The experiments of docs/results, parsed over Default.
	docs, err := filepath.Glob(filepath.Join("..", "..", "docs", "results", "experiments", "*.yaml"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("experiments: %v, %d files", err, len(docs))
	}
	for _, path := range docs {
		give["experiment-"+strings.TrimSuffix(filepath.Base(path), ".yaml")] = func() (Config, error) {
			data, err := os.ReadFile(path)
			if err != nil {
				return Config{}, err
			}
			return Parse(Default(), data)
		}
	}
	for name, get := range give {
		t.Run(name, func(t *testing.T) {
			c, err := get()
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(c, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "golden", name+".json")
			if *update {
				if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(append(got, '\n'), want) {
				t.Errorf("JSON of %s changed:\n%s\nwant\n%s", name, got, want)
			}
			var back Config
			if err := json.Unmarshal(want, &back); err != nil {
				t.Fatal(err)
			}
			if again, _ := json.MarshalIndent(back, "", "  "); !bytes.Equal(again, got) {
				t.Errorf("golden %s does not decode to the same config:\n%s", name, again)
			}
		})
	}
}

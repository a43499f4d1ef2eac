package store

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestWorldModelVersions(t *testing.T) {
	s := sharedStore(t)
	ctx := t.Context()
	r := newRun(t, s)
	v := WorldModelVersion{Run: r.ID, Step: 4, Hash: strings.Repeat("ab", 32), Location: "/d/wm-4.json", Base: "base",
		BaseExamples: 100, Pairs: 24, TrainMSE: 0.01, TrainSpearman: 0.7}
	if err := s.SaveWorldModelVersion(ctx, v); err != nil {
		t.Fatal(err)
	}
	// A retry of the same refresh, its file written elsewhere: a no-op,
	// the first location stays.
	again := v
	again.Location = "/other/wm-4.json"
	if err := s.SaveWorldModelVersion(ctx, again); err != nil {
		t.Fatalf("same version again: %v", err)
	}
	other := v
	other.Hash = strings.Repeat("cd", 32)
	if err := s.SaveWorldModelVersion(ctx, other); !errors.Is(err, ErrConflict) {
		t.Errorf("another version at the same step: %v, want ErrConflict", err)
	}
	for _, bad := range []func(*WorldModelVersion){
		func(v *WorldModelVersion) { v.Hash = "abc" },
		func(v *WorldModelVersion) { v.Location = "" },
		func(v *WorldModelVersion) { v.Step = -1 },
		func(v *WorldModelVersion) { v.Pairs = -1 },
	} {
		b := v
		b.Step = 9
		bad(&b)
		if err := s.SaveWorldModelVersion(ctx, b); err == nil {
			t.Errorf("saved invalid %+v", b)
		}
	}
	later := v
	later.Step, later.Hash, later.Location = 9, strings.Repeat("ef", 32), "/d/wm-9.json"
	if err := s.SaveWorldModelVersion(ctx, later); err != nil {
		t.Fatal(err)
	}
	got, err := s.WorldModelVersionAt(ctx, r.ID, 4)
	if err != nil || !reflect.DeepEqual(got, v) {
		t.Errorf("at step 4 = %+v, %v; want %+v", got, err, v)
	}
	got, err = s.WorldModelVersionByHash(ctx, r.ID, later.Hash)
	if err != nil || !reflect.DeepEqual(got, later) {
		t.Errorf("by hash = %+v, %v; want %+v", got, err, later)
	}
	if _, err := s.WorldModelVersionAt(ctx, r.ID, 5); !errors.Is(err, ErrNotFound) {
		t.Errorf("no version at step 5: %v", err)
	}
	all, err := s.WorldModelVersions(ctx, r.ID)
	if err != nil || !reflect.DeepEqual(all, []WorldModelVersion{v, later}) {
		t.Errorf("versions = %+v, %v", all, err)
	}
}

// AnchorPairsFrom leaves out the pairs before its first step, then applies
// the window to what is left.
func TestAnchorPairsFrom(t *testing.T) {
	s := sharedStore(t)
	ctx := t.Context()
	r := newRun(t, s)
	var keys []Key
	for step := range 4 {
		for i := range 2 {
			keys = append(keys, Key{r.ID, step, 0, i})
		}
	}
	all := storePairs(t, s, keys)
	got, err := s.AnchorPairsFrom(ctx, r.ID, 2, 3, 0)
	if err != nil || !reflect.DeepEqual(got, all[4:]) {
		t.Errorf("from step 2 = %+v, %v", got, err)
	}
	got, err = s.AnchorPairsFrom(ctx, r.ID, 1, 2, 3)
	if err != nil || !reflect.DeepEqual(got, all[3:6]) {
		t.Errorf("from step 1 up to 2, window 3 = %+v, %v", got, err)
	}
	got, err = s.AnchorPairsFrom(ctx, r.ID, 0, 3, 0)
	if err != nil || !reflect.DeepEqual(got, all) {
		t.Errorf("from step 0 = %+v, %v", got, err)
	}
}

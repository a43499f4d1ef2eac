// Package mode names the six training modes of a run and says which pieces
// of the method each one switches on. Every mode runs through the same
// workflow; the mode only decides which steps do work.
//
//	mode     world model  anchors  execute all  debias  denoise
//	grpo     -            -        yes          -       -
//	wm       yes          -        -            -       -
//	wmrl     yes          yes      -            yes     yes
//	mix      yes          yes      -            -       -
//	debias   yes          yes      -            yes     -
//	denoise  yes          yes      -            -       yes
//
// grpo is real-execution GRPO, the baseline; wm trains on world-model scores
// only; wmrl is the full method; mix, debias and denoise are its ablations.
package mode

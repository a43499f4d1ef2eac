// Package mode names the seven training modes of a run and says which pieces
// of the method each one switches on. Every mode runs through the same
// workflow; the mode only decides which steps do work.
//
//	mode     world model  anchors  execute all  debias  denoise  anchors only
//	grpo     -            -        yes          -       -        -
//	wm       yes          -        -            -       -        -
//	wmrl     yes          yes      -            yes     yes      -
//	mix      yes          yes      -            -       -        -
//	debias   yes          yes      -            yes     -        -
//	denoise  yes          yes      -            -       yes      -
//	anchor   -            yes      -            -       -        yes
//
// grpo is real-execution GRPO, the baseline; wm trains on world-model scores
// only; wmrl is the full method; mix, debias and denoise are its ablations;
// anchor is its control: GRPO on wmrl's anchor groups alone (the same
// groups, so the same executions), the other groups left out of the update,
// which shows what the world-model groups add.
package mode

package workflows

import "go.temporal.io/sdk/temporal"

// Custom search attributes (the dev server registers these names), so that
// a user can filter runs and steps in the Temporal UI.
const (
	AttrRunName      = "WmrlRunName"      // keyword
	AttrMode         = "WmrlMode"         // keyword
	AttrStep         = "WmrlStep"         // int
	AttrHeldOutScore = "WmrlHeldoutScore" // double
)

func keyRunName() temporal.SearchAttributeKeyKeyword {
	return temporal.NewSearchAttributeKeyKeyword(AttrRunName)
}
func keyMode() temporal.SearchAttributeKeyKeyword {
	return temporal.NewSearchAttributeKeyKeyword(AttrMode)
}
func keyStep() temporal.SearchAttributeKeyInt64 { return temporal.NewSearchAttributeKeyInt64(AttrStep) }
func keyHeldOut() temporal.SearchAttributeKeyFloat64 {
	return temporal.NewSearchAttributeKeyFloat64(AttrHeldOutScore)
}

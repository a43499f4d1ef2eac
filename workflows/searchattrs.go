package workflows

import (
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
)

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

// SearchAttributes are the custom search attributes wmrl's workflows set, by
// name and type. A namespace must have them before a run starts.
func SearchAttributes() map[string]enums.IndexedValueType {
	return map[string]enums.IndexedValueType{
		AttrRunName:      enums.INDEXED_VALUE_TYPE_KEYWORD,
		AttrMode:         enums.INDEXED_VALUE_TYPE_KEYWORD,
		AttrStep:         enums.INDEXED_VALUE_TYPE_INT,
		AttrHeldOutScore: enums.INDEXED_VALUE_TYPE_DOUBLE,
	}
}

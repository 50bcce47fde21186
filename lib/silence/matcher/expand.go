package matcher

// Expand fills the same template language as Render ({{.Node}}, {{.Group}},
// {{.Lock}}, regexQuote) into text that is not a matcher, such as the PromQL
// expression of a gate.promql check.
func Expand(src string, d Data) (string, error) { return expand(src, d) }

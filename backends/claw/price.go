package claw

import "strings"

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	InputPerMTok  float64 `json:"input_per_mtok"`
	OutputPerMTok float64 `json:"output_per_mtok"`
}

// defaultPrices are list prices of common model families, matched by the
// longest prefix of "<provider>/<model>". Options.Prices extends and
// overrides them; a cost the provider reports itself wins over both.
var defaultPrices = map[string]Price{
	"anthropic/claude-sonnet-4":  {3, 15},
	"anthropic/claude-haiku-4":   {1, 5},
	"anthropic/claude-3-5-haiku": {0.8, 4},
	"openai/gpt-4o-mini":         {0.15, 0.6},
	"openai/gpt-4o":              {2.5, 10},
	"openai/gpt-5-mini":          {0.25, 2},
	"openai/gpt-5":               {1.25, 10},
}

// priceOf finds the price of a model by longest prefix; ok is false for a
// model no table knows (its cost is then 0 and the run is unpriced).
func (b *Backend) priceOf(model string) (Price, bool) {
	best, bestLen := Price{}, -1
	for _, table := range []map[string]Price{defaultPrices, b.prices} {
		for prefix, p := range table {
			if strings.HasPrefix(model, prefix) && len(prefix) >= bestLen {
				best, bestLen = p, len(prefix)
			}
		}
	}
	return best, bestLen >= 0
}

// cost is the USD cost of a turn's tokens.
func (p Price) cost(in, out int64) float64 {
	return (float64(in)*p.InputPerMTok + float64(out)*p.OutputPerMTok) / 1e6
}

package cli

// suggest returns "; did you mean <prefix>X?" for the candidate nearest to word, or ""
// when none is near enough to be a typo of it: at most a third of its letters differ
// (--timout, --langauges and --max-paralel all find their flag; --foo finds nothing).
func suggest(word, prefix string, candidates []string) string {
	best, bestDist := "", len(word)/3+1
	for _, c := range candidates {
		if d := editDistance(word, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	if best == "" {
		return ""
	}
	return "; did you mean " + prefix + best + "?"
}

// editDistance is the Levenshtein distance between a and b (bytes: flag and command
// names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

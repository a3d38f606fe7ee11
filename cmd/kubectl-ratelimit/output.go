package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ratelimit-dev/ratelimit-operator/internal/usage"
)

const (
	// maxLabelRunes is the widest an identity is shown in a table.
	maxLabelRunes = 40
	// sourceRedis is the source of an answer Redis gave, with counts.
	sourceRedis = "Redis"
	// maxMs is the longest wait shown: a time.Duration rounded to the second still holds it.
	maxMs = math.MaxInt64/int64(time.Millisecond) - 1000
)

// writeJSON prints the server's JSON body indented.
func writeJSON(w io.Writer, body []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, body, "", "  "); err != nil {
		return fmt.Errorf("the usage server's answer is not JSON: %w", err)
	}
	buf.WriteByte('\n')
	if _, err := buf.WriteTo(w); err != nil {
		return fmt.Errorf("writing the answer: %w", err)
	}
	return nil
}

// checkOutput refuses an output format other than table and json.
func checkOutput(format string) error {
	if format != "table" && format != "json" {
		return fmt.Errorf("--output %q: want table or json", format)
	}
	return nil
}

// printAnswer prints the usage server's answer body: as is (indented) for -o json, else
// decoded into a T and written by table.
func printAnswer[T any](out io.Writer, format string, body []byte, table func(*T) error) error {
	if format == "json" {
		return writeJSON(out, body)
	}
	var answer T
	if err := json.Unmarshal(body, &answer); err != nil {
		return fmt.Errorf("decoding the usage server's answer: %w", err)
	}
	return table(&answer)
}

// writeUsageTable prints the decision, then each limit of the tier:
//
//	POLICY   TIER   IDENTITY   DECISION
//	orders   pro    alice      denied (per-minute: retry in 11.9s)
//
//	LIMIT        QUOTA   USED   REMAINING   FULL AGAIN IN   WAIT
//	per-minute   5       5      0           59.9s           11.9s
func writeUsageTable(w io.Writer, a *usageAnswer, identity string) error {
	rows := [][]string{
		{"POLICY", "TIER", "IDENTITY", "DECISION"},
		{a.Policy, tierLabel(a.Tier), identity, decision(a)},
	}
	if a.Source != "" && a.Source != sourceRedis {
		rows = append(rows, nil, []string{sourceLine(a)})
	}
	if len(a.Limits) > 0 {
		rows = append(rows, nil, []string{"LIMIT", "QUOTA", "USED", "REMAINING", "FULL AGAIN IN", "WAIT"})
		for _, l := range a.Limits {
			rows = append(rows, []string{l.Name, itoa(l.Quota), itoa(l.Used), itoa(l.Remaining),
				formatMs(l.ResetAfterMs), formatMs(l.RetryAfterMs)})
		}
	}
	return writeRows(w, rows)
}

// writeAdjustTable prints what a reset, refund or grant did: lines (a summary, then notes),
// then each limit:
//
//	granted 5 to orders (tier gold) for caller 5c0e2a
//	request id: kubectl-9f… (repeat with --request-id to retry safely)
//
//	LIMIT        QUOTA   REMAINING   APPLIED   RESETS IN
//	per-minute   5       10          5         59.9s
func writeAdjustTable(w io.Writer, lines []string, limits []usage.LimitChange) error {
	if _, err := io.WriteString(w, strings.Join(lines, "\n")+"\n"); err != nil {
		return fmt.Errorf("writing the answer: %w", err)
	}
	if len(limits) == 0 {
		return nil
	}
	rows := [][]string{nil, {"LIMIT", "QUOTA", "REMAINING", "APPLIED", "RESETS IN"}}
	for _, l := range limits {
		rows = append(rows, []string{printable(l.Name), itoa(l.Quota), itoa(l.Remaining), itoa(l.Applied),
			formatMs(l.ResetAfterMs)})
	}
	return writeRows(w, rows)
}

// writeRows prints rows aligned in columns; an empty row separates two tables.
func writeRows(w io.Writer, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	for _, row := range rows {
		if _, err := io.WriteString(tw, strings.Join(row, "\t")+"\n"); err != nil {
			return fmt.Errorf("writing the table: %w", err)
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the table: %w", err)
	}
	return nil
}

// tierLabel is the tier, or "default" when the policy has no tiers.
func tierLabel(tier string) string {
	if tier == "" {
		return "default"
	}
	return tier
}

// decision is the result, with the reported limit: how long to wait when denied, what is
// left when allowed.
func decision(a *usageAnswer) string {
	result := a.Result
	if result == "" {
		result = map[bool]string{true: "allowed", false: "denied"}[a.Allowed]
	}
	if a.Limit == "" {
		return result
	}
	switch {
	case result == "allowed":
		return fmt.Sprintf("%s (%s: %d of %d left)", result, a.Limit, a.Remaining, a.Quota)
	case result != "denied" && result != "shadow_denied":
		return result
	case a.RetryAfterMs < 0:
		return fmt.Sprintf("%s (%s: never at this cost)", result, a.Limit)
	default:
		return fmt.Sprintf("%s (%s: retry in %s)", result, a.Limit, formatMs(a.RetryAfterMs))
	}
}

// sourceLine says who decided when Redis did not.
func sourceLine(a *usageAnswer) string {
	if len(a.Limits) == 0 {
		return fmt.Sprintf("decided without Redis by %s: counts unknown", a.Source)
	}
	return "decided by " + a.Source
}

// itoa formats a count.
func itoa(n int64) string {
	return strconv.FormatInt(n, 10)
}

// formatMs is a wait or a time to reset, human-readable: "now" for 0, "never" for -1,
// to 0.1s under a minute, to the second above.
func formatMs(ms int64) string {
	switch {
	case ms < 0:
		return "never"
	case ms == 0:
		return "now"
	case ms > maxMs:
		ms = maxMs
	}
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < 100*time.Millisecond:
		return d.String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

// identityLabel is an identity as given, or a composite identity's parts joined with "/",
// safe to print in a table and at most maxLabelRunes long; "-" when there is none.
func identityLabel(identity string, hasIdentity bool, parts []string) string {
	if hasIdentity {
		return truncate(printable(identity))
	}
	if len(parts) == 0 {
		return "-"
	}
	shown := make([]string, len(parts))
	for i, p := range parts {
		shown[i] = printable(p)
	}
	return truncate(strings.Join(shown, "/"))
}

// printable is s, or s quoted Go style when it is empty or holds anything a terminal or a
// table would not show as itself (tabs, newlines, other control characters, invalid UTF-8).
func printable(s string) string {
	if s == "" || !utf8.ValidString(s) || strings.IndexFunc(s, isNotPrint) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// isNotPrint reports whether r is not printable.
func isNotPrint(r rune) bool {
	return !unicode.IsPrint(r)
}

// truncate cuts s to maxLabelRunes runes, the last one "…".
func truncate(s string) string {
	if utf8.RuneCountInString(s) <= maxLabelRunes {
		return s
	}
	return string([]rune(s)[:maxLabelRunes-1]) + "…"
}

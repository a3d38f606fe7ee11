// Package docs checks the repository's Markdown documentation: every relative link in the
// README, docs/ and the chart's README names a file that exists, every #anchor names a
// heading of its target page (by GitHub's anchor rules), and the README stays short.
package docs

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// maxReadmeLines is the README's budget: what the project is, the two commands, a quick
// start and a map of docs/. Everything else belongs in a page under docs/.
const maxReadmeLines = 300

// repoRoot is the repository root, two directories above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root %s: %v", root, err)
	}
	return root
}

// docFiles are the Markdown files whose links are checked, relative to the root.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md", filepath.Join("charts", "ratelimit-operator", "README.md")}
	matches, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(matches) == 0 {
		t.Fatal("docs/ holds no Markdown file")
	}
	for _, m := range matches {
		rel, err := filepath.Rel(root, m)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, rel)
	}
	sort.Strings(files)
	return files
}

var (
	fenceRe      = regexp.MustCompile("^\\s*(```|~~~)")
	headingRe    = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlAnchorRe = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	codeSpanRe   = regexp.MustCompile("`[^`]*`")
	linkRe       = regexp.MustCompile(`!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	schemeRe     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	notAnchorRe  = regexp.MustCompile(`[^\p{L}\p{N}\p{M} _-]`)
	emphasisRe   = regexp.MustCompile(`(\*\*|__|\*)`)
)

// link is one Markdown link found in a file.
type link struct {
	line   int
	target string
}

// page is what the check needs of one Markdown file: its links and its heading anchors.
type page struct {
	links   []link
	anchors map[string]bool
}

// githubAnchor is the anchor GitHub gives a heading: the heading's text (links reduced to
// their text, code spans to their content, emphasis markers dropped), lower-cased, with every
// character but letters, digits, spaces, '-' and '_' removed and each space turned into '-'.
func githubAnchor(heading string) string {
	s := linkRe.ReplaceAllString(heading, "$1")
	s = strings.ReplaceAll(s, "`", "")
	s = emphasisRe.ReplaceAllString(s, "")
	s = strings.ToLower(strings.TrimSpace(s))
	s = notAnchorRe.ReplaceAllString(s, "")
	return strings.ReplaceAll(s, " ", "-")
}

// readPage reads path's links and anchors, skipping fenced code blocks, where neither a
// '#' line nor a [x](y) is Markdown.
func readPage(path string) (page, error) {
	f, err := os.Open(path)
	if err != nil {
		return page{}, err
	}
	defer f.Close()
	p := page{anchors: map[string]bool{}}
	seen := map[string]int{}
	var fence string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := fenceRe.FindStringSubmatch(line); m != nil {
			switch fence {
			case "":
				fence = m[1]
			case m[1]:
				fence = ""
			}
			continue
		}
		if fence != "" {
			continue
		}
		for _, m := range htmlAnchorRe.FindAllStringSubmatch(line, -1) {
			p.anchors[m[1]] = true
		}
		if m := headingRe.FindStringSubmatch(line); m != nil {
			a := githubAnchor(m[2])
			if k := seen[a]; k > 0 {
				p.anchors[fmt.Sprintf("%s-%d", a, k)] = true
			} else {
				p.anchors[a] = true
			}
			seen[a]++
		}
		for _, m := range linkRe.FindAllStringSubmatch(codeSpanRe.ReplaceAllString(line, ""), -1) {
			p.links = append(p.links, link{line: n, target: m[2]})
		}
	}
	return p, sc.Err()
}

// TestGitHubAnchor pins the anchor rule on headings this repository's docs use.
func TestGitHubAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"The two commands": "the-two-commands",
		"Prove an install on your cluster: `make e2e`":        "prove-an-install-on-your-cluster-make-e2e",
		"Hot keys: leases (the local tier)":                   "hot-keys-leases-the-local-tier",
		"AUTH / ACL":                                          "auth--acl",
		"Gateway API: attach policies to Gateways and routes": "gateway-api-attach-policies-to-gateways-and-routes",
		"RateLimitDecisionsWithoutRedis":                      "ratelimitdecisionswithoutredis",
		"snake_case and **bold** [a link](x.md)":              "snake_case-and-bold-a-link",
		"Events, logs and profiling":                          "events-logs-and-profiling",
	} {
		if got := githubAnchor(heading); got != want {
			t.Errorf("githubAnchor(%q) = %q, want %q", heading, got, want)
		}
	}
}

// pages reads each Markdown file once.
type pages map[string]page

func (ps pages) load(path string) (page, error) {
	if p, ok := ps[path]; ok {
		return p, nil
	}
	p, err := readPage(path)
	if err == nil {
		ps[path] = p
	}
	return p, err
}

// checkLink returns what is wrong with target, a link in the file src, or "".
func (ps pages) checkLink(root, src, target string) string {
	path, anchor, _ := strings.Cut(target, "#")
	dst := src
	if path != "" {
		if strings.HasPrefix(path, "/") {
			return "use a path relative to the file, not one from the root"
		}
		dst = filepath.Join(filepath.Dir(src), filepath.FromSlash(path))
		if r, err := filepath.Rel(root, dst); err != nil || strings.HasPrefix(r, "..") {
			return "points outside the repository"
		}
		if _, err := os.Stat(dst); err != nil {
			return "no such file or directory"
		}
	}
	if anchor == "" || !strings.HasSuffix(dst, ".md") {
		return ""
	}
	tp, err := ps.load(dst)
	if err != nil {
		return err.Error()
	}
	if !tp.anchors[anchor] {
		return fmt.Sprintf("no heading with anchor #%s in %s", anchor, filepath.Base(dst))
	}
	return ""
}

// TestLinks checks that every relative link of the docs names an existing file or
// directory, and that every #anchor names a heading of the Markdown page it points into.
func TestLinks(t *testing.T) {
	root := repoRoot(t)
	ps := pages{}
	checked := 0
	for _, rel := range docFiles(t, root) {
		src := filepath.Join(root, rel)
		p, err := ps.load(src)
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		for _, l := range p.links {
			if l.target == "" || schemeRe.MatchString(l.target) {
				continue
			}
			checked++
			if msg := ps.checkLink(root, src, l.target); msg != "" {
				t.Errorf("%s:%d: link %q: %s", rel, l.line, l.target, msg)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the link pattern is broken")
	}
}

// TestReadmeLength keeps the README an entry point: at most maxReadmeLines lines.
func TestReadmeLength(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	n := strings.Count(string(b), "\n")
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	if n > maxReadmeLines {
		t.Errorf("README.md has %d lines, more than %d: move sections into docs/ and link them from the README's map", n, maxReadmeLines)
	}
}

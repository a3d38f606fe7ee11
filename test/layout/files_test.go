package layout

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/hack/controlplane"
)

// maxTrackedFileBytes bounds a tracked file: the largest real ones (the CRDs, go.sum files,
// docs/api.md) are under 100 KiB, so anything near 2 MiB is a build output or a data dump
// committed by mistake, which every clone then carries for good.
const maxTrackedFileBytes = 2 << 20

// trackedFile is one path of the index and its git mode (100644, 100755, 120000, 160000).
type trackedFile struct {
	mode, path string
}

// trackedFiles lists the index at the repository's top: git ls-files --stage.
func trackedFiles(t *testing.T) []trackedFile {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "git", "ls-files", "--stage", "-z")
	cmd.Dir = controlplane.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var files []trackedFile
	for rec := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		// "<mode> <object> <stage>\t<path>"
		meta, path, ok := strings.Cut(rec, "\t")
		if !ok {
			t.Fatalf("git ls-files: unexpected record %q", rec)
		}
		files = append(files, trackedFile{mode: strings.Fields(meta)[0], path: path})
	}
	if len(files) == 0 {
		t.Fatal("git ls-files listed nothing")
	}
	return files
}

// TestNoBinaryOrLargeFileTracked: no tracked file is an executable binary (ELF, Mach-O, PE or
// WebAssembly by its magic number), an executable that is not a "#!" script, or larger than
// 2 MiB. A binary built at the top (go build ./cmd/kubectl-ratelimit) and committed by
// mistake put 15 MB in every clone; .gitignore keeps the command names out, this keeps out
// the rest. A tracked file missing from the work tree (deleted, not yet committed) is skipped.
func TestNoBinaryOrLargeFileTracked(t *testing.T) {
	root := controlplane.RepoRoot()
	for _, f := range trackedFiles(t) {
		if f.mode == "120000" || f.mode == "160000" { // a symbolic link, a submodule
			continue
		}
		head, size, err := readHead(filepath.Join(root, filepath.FromSlash(f.path)))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", f.path, err)
			continue
		}
		if why := binaryKind(head); why != "" {
			t.Errorf("%s is an executable binary (%s, %d bytes): remove it with git rm and ignore it in .gitignore", f.path, why, size)
		} else if f.mode == "100755" && !bytes.HasPrefix(head, []byte("#!")) {
			t.Errorf("%s is executable but no \"#!\" script: clear its executable bit (git update-index --chmod=-x) or remove it", f.path)
		}
		if size > maxTrackedFileBytes {
			t.Errorf("%s holds %d bytes, over %d: keep large files out of the repository", f.path, size, maxTrackedFileBytes)
		}
	}
}

// readHead is the first 4 KiB of the file at path, and its size.
func readHead(path string) ([]byte, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	head := make([]byte, 4096)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, 0, err
	}
	return head[:n], st.Size(), nil
}

// binaryKind names the executable format head begins with, or "" for none.
func binaryKind(head []byte) string {
	switch {
	case bytes.HasPrefix(head, []byte("\x7fELF")):
		return "ELF"
	case len(head) >= 4 && isMachO(binary.BigEndian.Uint32(head)):
		return "Mach-O"
	case bytes.HasPrefix(head, []byte("\x00asm")):
		return "WebAssembly"
	case isPE(head):
		return "PE"
	}
	return ""
}

// isMachO reports whether magic is a Mach-O magic number, thin (32 or 64 bit, either byte
// order) or universal.
func isMachO(magic uint32) bool {
	switch magic {
	case 0xfeedface, 0xfeedfacf, 0xcefaedfe, 0xcffaedfe, 0xcafebabe, 0xbebafeca:
		return true
	}
	return false
}

// isPE reports whether head is a DOS stub ("MZ") pointing at a PE header ("PE\0\0").
func isPE(head []byte) bool {
	if !bytes.HasPrefix(head, []byte("MZ")) || len(head) < 0x40 {
		return false
	}
	off := binary.LittleEndian.Uint32(head[0x3c:])
	return uint64(off)+4 <= uint64(len(head)) && bytes.Equal(head[off:off+4], []byte("PE\x00\x00"))
}

// TestBinaryKind: each executable format is told by its magic, and text is not.
func TestBinaryKind(t *testing.T) {
	pe := make([]byte, 0x90)
	copy(pe, "MZ")
	binary.LittleEndian.PutUint32(pe[0x3c:], 0x80)
	copy(pe[0x80:], "PE\x00\x00")
	for _, c := range []struct {
		head []byte
		want string
	}{
		{[]byte("\x7fELF\x02\x01\x01"), "ELF"},
		{[]byte{0xcf, 0xfa, 0xed, 0xfe, 7, 0, 0, 1}, "Mach-O"},
		{[]byte{0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 2}, "Mach-O"},
		{[]byte("\x00asm\x01\x00\x00\x00"), "WebAssembly"},
		{pe, "PE"},
		{[]byte("MZ is a fine start of a text file, too short to be a PE stub"), ""},
		{[]byte("#!/usr/bin/env bash\n"), ""},
		{[]byte("package layout\n"), ""},
		{nil, ""},
	} {
		if got := binaryKind(c.head); got != c.want {
			t.Errorf("%q: %q, want %q", c.head[:min(len(c.head), 8)], got, c.want)
		}
	}
}

// TestCommandBinariesIgnored: the binary go build ./cmd/<name> leaves at the top is ignored by
// git for every command, so that git add -A never picks one up.
func TestCommandBinariesIgnored(t *testing.T) {
	root := controlplane.RepoRoot()
	entries, err := os.ReadDir(filepath.Join(root, "cmd"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		cmd := exec.CommandContext(t.Context(), "git", "check-ignore", "-q", "--no-index", e.Name())
		cmd.Dir = root
		if err := cmd.Run(); err != nil {
			t.Errorf("/%s (go build ./cmd/%s) is not ignored: add it to .gitignore (%v)", e.Name(), e.Name(), err)
		}
	}
}

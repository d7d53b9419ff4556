package manifest

import (
	"bytes"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

// ReadTree reads every file below the directories dirs of root (relative,
// slash separated) and returns them by their path relative to root, slash
// separated. A directory that does not exist is an error.
func ReadTree(root string, dirs ...string) (map[string][]byte, error) {
	files := map[string][]byte{}
	for _, dir := range dirs {
		err := filepath.WalkDir(filepath.Join(root, filepath.FromSlash(dir)), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files[filepath.ToSlash(rel)], err = os.ReadFile(path)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return files, nil
}

// WriteTree makes the directories owned of root (relative, slash separated)
// hold exactly files (by path relative to root, slash separated): it removes
// every other file below them and writes the files whose content differs,
// leaving the others untouched, so that an unchanged generation changes
// nothing. logf, when not nil, is told of every removal and write.
func WriteTree(root string, owned []string, files map[string][]byte, logf func(format string, args ...any)) error {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	for _, dir := range owned {
		if err := os.MkdirAll(filepath.Join(root, filepath.FromSlash(dir)), 0o755); err != nil {
			return err
		}
	}
	existing, err := ReadTree(root, owned...)
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(existing)) {
		if _, keep := files[name]; !keep {
			path := filepath.Join(root, filepath.FromSlash(name))
			if err := os.Remove(path); err != nil {
				return err
			}
			logf("removed %s", path)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if old, ok := existing[name]; ok && bytes.Equal(old, files[name]) {
			continue
		}
		path := filepath.Join(root, filepath.FromSlash(name))
		if _, err := WriteFile(path, files[name]); err != nil {
			return err
		}
		logf("wrote %s", path)
	}
	return nil
}

// WriteFile writes content to path, creating its directory, unless the file
// already holds it; it reports whether it wrote.
func WriteFile(path string, content []byte) (bool, error) {
	old, err := os.ReadFile(path)
	if err == nil && bytes.Equal(old, content) {
		return false, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, err
	}
	return true, os.WriteFile(path, content, 0o644)
}

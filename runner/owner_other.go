//go:build !unix

package runner

import "os"

// ownedByMe cannot tell a file's owner here, so no directory counts as private: the
// fallback audit file is not used (airlock serves only on unix systems anyway).
func ownedByMe(os.FileInfo) bool { return false }

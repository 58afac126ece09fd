package linux

// The init (artifacts_linux.c) collects the output directory after every process of the
// sandbox is dead; it trusts nothing in it (no symlink followed, no FIFO or device
// opened, no hard-linked file read) and sends each entry's bytes. The parent hashes them.

// maxArtifactDepth bounds the walk of the output directory.
const maxArtifactDepth = 8

// maxArtifactEntries bounds how many entries are listed, returned or not: a program that
// leaves 60,000 files in out/ must not flood the result. The rest are counted in one
// closing entry.
const maxArtifactEntries = 256

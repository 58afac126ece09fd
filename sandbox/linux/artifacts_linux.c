// The artifact walker: the output directory, read after the program is dead. Its rules
// and their order are sandbox.Skip's and ArtifactLimits.Check's (sandbox/artifacts.go),
// which the darwin walker follows too; it sends each reason as its ART_* code, which the
// parent maps to the reason's text. The limits arrive with their floors applied.
//
//	collect_artifacts → art_walk (sorted, depth-bounded) → art_file per regular file
//	→ art_entry (wb_artifact) per entry, and one closing entry for the unlisted (ART_CUT
//	when the walk read max_walk entries and a directory held more)

#include "init_linux.h"

// The collector runs after every process of the sandbox is dead, so nothing changes the
// tree while it is read, and it trusts nothing in it: each component is opened with
// O_NOFOLLOW relative to its parent, so a symlink is never followed; FIFOs, devices and
// sockets are skipped unopened; files with more than one link are skipped, because a
// hard link may name a file outside the output directory. The parent hashes the data.

static void art_entry(struct collector *c, const char *path, int64_t size, uint8_t why, const uint8_t *data, uint32_t len) {
	wb_artifact(&c->out, path, size, why, data, len);
	c->listed++;
}

static int art_full(struct collector *c) {
	if (c->listed < c->cfg->max_entries)
		return 0;
	c->unlisted++;
	return 1;
}

static void art_skip(struct collector *c, const char *path, int64_t size, uint8_t why) {
	if (!art_full(c))
		art_entry(c, path, size, why, NULL, 0);
}

static void art_file(struct collector *c, int dirfd, const char *name, const char *path, const struct stat *st) {
	int64_t size = st->st_size;
	const struct config *cfg = c->cfg;
	if (art_full(c))
		return;
	if (st->st_nlink > 1) {
		art_skip(c, path, size, ART_HARD_LINK);
		return;
	}
	if (c->count >= cfg->max_files) {
		art_skip(c, path, size, ART_TOO_MANY_FILES);
		return;
	}
	if (size > cfg->max_file_bytes) {
		art_skip(c, path, size, ART_FILE_TOO_LARGE);
		return;
	}
	if (c->total + size > cfg->max_total) {
		art_skip(c, path, size, ART_TOTAL_CAP);
		return;
	}
	if (size > (int64_t)MAX_FRAME) {
		art_skip(c, path, size, ART_FILE_TOO_LARGE);
		return;
	}
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		art_skip(c, path, size, ART_UNREADABLE);
		return;
	}
	struct stat st2;
	uint8_t *data = malloc((size_t)size + 1);
	if (!data || fstat(fd, &st2) < 0 || st2.st_ino != st->st_ino || st2.st_dev != st->st_dev ||
	    !S_ISREG(st2.st_mode)) {
		close(fd);
		free(data);
		art_skip(c, path, size, ART_CHANGED);
		return;
	}
	size_t got = 0;
	for (;;) {
		ssize_t r = read(fd, data + got, (size_t)size + 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
		if (got == (size_t)size + 1)
			break;
	}
	close(fd);
	if (got != (size_t)size) {
		free(data);
		art_skip(c, path, size, ART_CHANGED);
		return;
	}
	c->count++;
	c->total += size;
	art_entry(c, path, size, ART_RETURNED, data, (uint32_t)size);
	free(data);
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void art_walk(struct collector *c, int dirfd, const char *rel, uint32_t depth) {
	int dup = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	if (dup < 0)
		return;
	DIR *d = fdopendir(dup);
	if (!d) {
		close(dup);
		return;
	}
	// At most what is left of the walk's budget (max_walk) is read, as sandbox.WalkArtifacts
	// reads it: a directory with an entry left when the budget is spent cuts the walk.
	size_t n = 0, cap = 64;
	char **names = malloc(cap * sizeof *names);
	struct dirent *e;
	while (names && (e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (c->left == 0) {
			c->cut = 1;
			break;
		}
		if (n == cap) {
			char **nn = realloc(names, (cap *= 2) * sizeof *names);
			if (!nn)
				break;
			names = nn;
		}
		c->left--;
		names[n++] = strdup(e->d_name);
	}
	closedir(d);
	if (!names)
		return;
	qsort(names, n, sizeof *names, cmp_names);
	for (size_t i = 0; i < n; i++) {
		const char *name = names[i];
		if (!name)
			continue;
		char path[PATH_MAX];
		if (snprintf(path, sizeof path, "%s%s%s", rel, *rel ? "/" : "", name) >= (int)sizeof path) {
			art_skip(c, name, 0, ART_PATH_TOO_LONG);
			continue;
		}
		struct stat st;
		if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		switch (st.st_mode & S_IFMT) {
		case S_IFDIR: {
			if (depth + 1 >= c->cfg->max_depth) {
				art_skip(c, path, 0, ART_TOO_DEEP);
				break;
			}
			int sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0)
				break;
			art_walk(c, sub, path, depth + 1);
			close(sub);
			break;
		}
		case S_IFREG:
			art_file(c, dirfd, name, path, &st);
			break;
		case S_IFLNK:
			art_skip(c, path, 0, ART_SYMLINK);
			break;
		default:
			art_skip(c, path, 0, ART_NOT_REGULAR);
		}
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

void collect_artifacts(struct collector *c) {
	int fd = open(workspace_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	char *rel = strdup(c->cfg->out_dir);
	for (char *save = NULL, *part = strtok_r(rel, "/", &save); fd >= 0 && part; part = strtok_r(NULL, "/", &save)) {
		int next = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = next;
	}
	free(rel);
	if (fd < 0)
		return;
	c->left = c->cfg->max_walk;
	art_walk(c, fd, "", 0);
	close(fd);
	// The closing entry's size field counts the entries not listed.
	if (c->cut)
		art_entry(c, "...", c->unlisted, ART_CUT, NULL, 0);
	else if (c->unlisted > 0)
		art_entry(c, "...", c->unlisted, ART_UNLISTED, NULL, 0);
}

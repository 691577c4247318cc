/*
 * Write-protection of pages while a registration moves them (segs.c): the move
 * copies the pages onto a memfd and maps the memfd over them, and a write another
 * thread makes between the copy and the mapping would land on the old pages and be
 * lost. rdma_rxe pins pages in place (ib_umem_get) and loses nothing, so for the
 * move those pages are write-protected with a userfaultfd (Linux 5.7 for anonymous
 * memory; UFFD_FEATURE_WP_UNPOPULATED, 6.4, also covers pages never touched): a
 * thread that writes them meanwhile waits in the kernel, and its write goes to the
 * new mapping once woken. The library never reads the userfaultfd's messages; it
 * only wakes the waiters (UFFDIO_WAKE).
 *
 * Where there is none (a kernel without it, a seccomp filter that refuses the
 * system call, memory a userfaultfd cannot protect: file-backed private or huge
 * pages), the move is made unprotected, as before, and wp_begin says so once.
 */
#include "libxroce.h"

#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)
#endif

static int wp_fd = -2;  /* the userfaultfd: -2 before the first try, -1 none */
static int wp_unpopulated; /* untouched pages are protected too */

/* wp_open makes the process's userfaultfd on first use; segs_lock is held. */
static int wp_open(void)
{
	struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_WP_UNPOPULATED };
	int fd;

	if (wp_fd != -2)
		return wp_fd;
	wp_fd = -1;
	fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 && errno == EPERM) /* vm.unprivileged_userfaultfd 0: the user's own faults only */
		fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (fd < 0)
		return -1;
	wp_unpopulated = !ioctl(fd, UFFDIO_API, &api);
	if (!wp_unpopulated) { /* an API handshake is once per fd: a fresh one without the feature */
		close(fd);
		fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
		api.features = 0;
		if (fd < 0 || ioctl(fd, UFFDIO_API, &api) || !(api.ioctls & (1ull << _UFFDIO_REGISTER))) {
			if (fd >= 0)
				close(fd);
			return -1;
		}
	}
	return wp_fd = fd;
}

/* mine says whether [s, s+len) holds what this thread's C library may write while
 * it makes the move: its errno or its thread descriptor. Waiting for itself there
 * would never end. */
static int mine(uintptr_t s, size_t len)
{
	uintptr_t e = (uintptr_t)&errno, t = (uintptr_t)pthread_self();

	return (e >= s && e < s + len) || (t + 4096 > s && t < s + len);
}

/*
 * wp_begin write-protects the pages [s, s+len) of anonymous memory, not on the
 * calling thread's stack, for a move: other threads' writes wait until wp_end. 1
 * when they are protected, 0 when they cannot be (the move goes on unprotected).
 * segs_lock is held.
 */
int wp_begin(uintptr_t s, size_t len)
{
	struct uffdio_register reg = { .range = { .start = s, .len = len }, .mode = UFFDIO_REGISTER_MODE_WP };
	struct uffdio_writeprotect wp = { .range = { .start = s, .len = len }, .mode = UFFDIO_WRITEPROTECT_MODE_WP };
	static int said;
	int fd = wp_open();

	if (fd < 0 || mine(s, len) || ioctl(fd, UFFDIO_REGISTER, &reg)) {
		if (!said && fd < 0 && (said = 1))
			warnx("ibv_reg_mr: no userfaultfd write-protection here (%s): a write another thread makes to the pages of a region while ibv_reg_mr moves them may be lost (docs/verbs-library.md, \"Memory regions\")",
			      strerror(errno));
		return 0;
	}
	if (!wp_unpopulated) /* a page never touched has nothing to protect: read it in */
		for (uintptr_t p = s; p < s + len; p += 4096)
			(void)*(volatile const char *)p;
	if (ioctl(fd, UFFDIO_WRITEPROTECT, &wp)) {
		struct uffdio_range r = { .start = s, .len = len };

		ioctl(fd, UFFDIO_UNREGISTER, &r);
		return 0;
	}
	return 1;
}

/* wp_end ends wp_begin's protection: when the move failed (moved 0) the old pages
 * get it off; the threads that waited are woken and write again, to the new
 * mapping or the old pages. */
void wp_end(uintptr_t s, size_t len, int moved)
{
	struct uffdio_range r = { .start = s, .len = len };

	if (!moved) {
		struct uffdio_writeprotect wp = { .range = r, .mode = 0 };

		ioctl(wp_fd, UFFDIO_WRITEPROTECT, &wp);
		ioctl(wp_fd, UFFDIO_UNREGISTER, &r);
	}
	ioctl(wp_fd, UFFDIO_WAKE, &r);
}

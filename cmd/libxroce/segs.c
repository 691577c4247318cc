/*
 * Registered memory shared with the daemon (docs/verbs-library.md, "Memory
 * regions"): ibv_reg_mr moves the pages of a region onto a sealed memfd, mapped
 * MAP_SHARED at the same addresses, so the application keeps its data where it was
 * and the daemon's engine reads and writes the same pages. A segment is one such
 * page range; regions on the same pages share it.
 *
 * Three cases need care, because moving a page copies its bytes and then replaces it:
 *  - Other threads writing the pages: they are write-protected for the move with a
 *    userfaultfd (wprotect.c), so a write waits and lands on the new mapping rather
 *    than on the old page after its copy (where it was lost).
 *  - The calling thread's own stack (a buffer in a local array): the thread writes
 *    its stack while it runs, so the copy and the replacement are made on another
 *    stack (swapcontext), with every signal blocked, while nothing writes this one.
 *  - fork(2): MAP_SHARED pages stay shared with a child, where rdma_rxe's pinned
 *    pages are copied for the child at the fork (the child's writes never reach
 *    the parent). The child gives every segment private anonymous copies
 *    (pthread_atfork; a MAP_PRIVATE mapping of the memfd would still show the
 *    parent's later writes to pages the child has not written). The forking
 *    thread's own stack pages, which both processes write as soon as the fork
 *    returns, get their private copies in the parent before the fork and go back
 *    onto the memfd after it (a write the daemon makes to them meanwhile is lost).
 */
#include "libxroce.h"

#include <limits.h>
#include <signal.h>
#include <sys/resource.h>
#include <ucontext.h>

/* A seg is a page range of this process moved onto a memfd for registration.
 * Regions on the same pages share it; refs counts them. */
struct seg {
	uintptr_t start, len;
	int fd; /* -1 once retired past the revivable ones */
	int refs;
	int forking; /* on the stack of the thread that is forking: private until it returns */
	ino_t ino;   /* the memfd's, to know its mapping (still_mapped) */
	struct seg *next;
};

static pthread_mutex_t segs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct seg *segs;
/* Segments no region uses any more: their pages stay on the memfd (moving them back
 * at deregistration would lose what other threads write to those pages meanwhile)
 * until a fork gives the child private copies of them (fork_child). */
static struct seg *retired;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

int seg_fd(const struct seg *g)
{
	return g->fd;
}

/* copy_in copies len bytes at src (this process's memory) to dst, failing with
 * EFAULT instead of crashing when src is not readable. */
static int copy_in(void *dst, const void *src, size_t len)
{
	struct iovec l = { .iov_base = dst, .iov_len = len };
	struct iovec r = { .iov_base = (void *)src, .iov_len = len };
	ssize_t n = process_vm_readv(getpid(), &l, 1, &r, 1, 0);

	if (n == (ssize_t)len)
		return 0;
	if (n < 0 && (errno == ENOSYS || errno == EPERM)) {
		memcpy(dst, src, len); /* no process_vm_readv: plain copy */
		return 0;
	}
	return EFAULT;
}

/* replace_pages copies the pages [s, s+len) and puts the copy in their place:
 * onto memfd fd, mapped MAP_SHARED (fd ≥ 0), or onto fresh anonymous private pages
 * moved over them with mremap (fd < 0). 0 or an errno. */
static int replace_pages(uintptr_t s, size_t len, int fd)
{
	void *tmp = fd >= 0 ? mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
			    : mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	void *p;
	int err;

	if (tmp == MAP_FAILED)
		return errno;
	if ((err = copy_in(tmp, (void *)s, len))) {
		munmap(tmp, len);
		return err;
	}
	if (fd < 0) {
		p = mremap(tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)s);
		err = p == MAP_FAILED ? errno : 0;
		if (err)
			munmap(tmp, len);
		return err;
	}
	p = mmap((void *)s, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
	err = p == MAP_FAILED ? errno : 0;
	munmap(tmp, len);
	return err;
}

/* The replacement made on another stack: the arguments and the contexts are static
 * (not on the stack being replaced); segs_lock serializes their use. */
static struct {
	uintptr_t s;
	size_t len;
	int fd, err;
	ucontext_t caller, mover;
	char *stack;
} away;

static void replace_away(void)
{
	away.err = replace_pages(away.s, away.len, away.fd);
} /* returns to away.caller (uc_link) */

/* grow_main_stack makes the main thread's stack mapping reach 256 KiB below the
 * caller's frame: once a page of it is a memfd mapping, the kernel no longer grows
 * the stack past that page, so it must already lie below every page replaced. */
static void __attribute__((noinline)) grow_main_stack(void)
{
	volatile char pad[256 << 10];

	pad[0] = 0;
	__asm__ volatile("" : : "r"(pad) : "memory");
}

/* The main thread's stack: up to RLIMIT_STACK (at least 8 MiB, at most 4 GiB)
 * below the end of the mapping /proc/self/maps labels [stack]. Read once, before
 * it matters: glibc's pthread_getattr_np measures the main thread's stack from the
 * mapping below it, which a moved stack page cuts short. */
static uintptr_t main_stack_lo, main_stack_hi;

static void find_main_stack(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	unsigned long lo, hi;
	struct rlimit rl;
	uintptr_t size = 8ul << 20;

	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "[stack]") && sscanf(line, "%lx-%lx", &lo, &hi) == 2) {
			main_stack_hi = hi;
			break;
		}
	if (f)
		fclose(f);
	if (!getrlimit(RLIMIT_STACK, &rl) && rl.rlim_cur > size)
		size = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (4ul << 30) ? 4ul << 30 : rl.rlim_cur;
	main_stack_lo = main_stack_hi > size ? main_stack_hi - size : 0;
}

/* on_own_stack says whether [s, e) overlaps the calling thread's stack (the main
 * thread's as find_main_stack found it; another thread's from its descriptor). */
static int on_own_stack(uintptr_t s, uintptr_t e)
{
	pthread_attr_t a;
	void *addr;
	size_t size;
	int in = 0;

	if (gettid() == getpid())
		return s < main_stack_hi && e > main_stack_lo;
	if (pthread_getattr_np(pthread_self(), &a))
		return 0;
	if (!pthread_attr_getstack(&a, &addr, &size))
		in = s < (uintptr_t)addr + size && e > (uintptr_t)addr;
	pthread_attr_destroy(&a);
	return in;
}

/* replace_stack_pages is replace_pages for pages of the calling thread's stack:
 * the copy and the replacement run on a stack of their own, signals blocked, so
 * that no write to this stack falls between them and is lost. segs_lock is held. */
static int replace_stack_pages(uintptr_t s, size_t len, int fd)
{
	enum { stack_size = 64 << 10 };

	if (!away.stack) { /* a mapping of its own, on no page an application registers */
		void *p = mmap(NULL, stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
		if (p == MAP_FAILED)
			return errno;
		away.stack = p;
	}
	if (gettid() == getpid())
		grow_main_stack();
	if (getcontext(&away.mover))
		return errno;
	away.mover.uc_stack.ss_sp = away.stack;
	away.mover.uc_stack.ss_size = stack_size;
	away.mover.uc_link = &away.caller;
	sigfillset(&away.mover.uc_sigmask);
	makecontext(&away.mover, replace_away, 0);
	away.s = s;
	away.len = len;
	away.fd = fd;
	away.err = 0;
	if (swapcontext(&away.caller, &away.mover))
		return errno;
	return away.err;
}

/* read_maps returns /proc/self/maps, NUL-terminated (free it), or NULL. */
static char *read_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char *buf = NULL;
	size_t n = 0, len = 0;

	if (!f)
		return NULL;
	for (;;) {
		if (n - len < 4096) {
			char *nb = realloc(buf, n = n ? 2 * n : 65536);
			if (!nb) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = nb;
		}
		size_t k = fread(buf + len, 1, n - len - 1, f);
		if (!k)
			break;
		len += k;
	}
	fclose(f);
	buf[len] = 0;
	return buf;
}

/* A mapping of /proc/self/maps: its range and inode. */
struct vma {
	unsigned long lo, hi, ino;
};

/* skip_fields returns p past the next k space-separated fields of its line. */
static char *skip_fields(const char *p, int k)
{
	for (; k > 0 && *p && *p != '\n'; k--) {
		while (*p == ' ')
			p++;
		while (*p && *p != ' ' && *p != '\n')
			p++;
	}
	return (char *)p;
}

/* parse_vmas returns maps' (read_maps) mappings in its order, which is the
 * addresses' (free it), *n of them; NULL when out of memory. strtoul, not sscanf:
 * a process with many registrations has thousands of lines. */
static struct vma *parse_vmas(const char *maps, size_t *n)
{
	size_t cap = 256;
	struct vma *v = malloc(cap * sizeof(*v));
	const char *l;
	char *p;

	*n = 0;
	for (l = maps; v && l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		struct vma m;

		m.lo = strtoul(l, &p, 16);
		if (*p != '-')
			continue;
		m.hi = strtoul(p + 1, &p, 16);
		m.ino = strtoul(skip_fields(p, 3), NULL, 10); /* past perms, offset, device */
		if (*n == cap) {
			struct vma *nv = realloc(v, (cap *= 2) * sizeof(*v));
			if (!nv) {
				free(v);
				return NULL;
			}
			v = nv;
		}
		v[(*n)++] = m;
	}
	return v;
}

/* still_mapped says whether the mappings v (parse_vmas, n of them) have the pages
 * [start, start+len) as one mapping of g's memfd (its inode): not when the
 * application unmapped them, or mapped something else there, or part of them. */
static int still_mapped(const struct vma *v, size_t n, const struct seg *g)
{
	size_t lo = 0, hi = n;

	while (lo < hi) { /* the first mapping starting at or after g's start */
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid].lo < g->start)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo].lo == g->start && v[lo].hi == g->start + g->len && v[lo].ino == (unsigned long)g->ino;
}

/* maps_line parses one line of /proc/self/maps: its range, protection and
 * whether it is shared, and whether it is one of the library's own memfds. 0 at
 * the end or on a line it cannot read. */
static int maps_line(const char *l, unsigned long *lo, unsigned long *hi, int *prot, int *shared, int *ours)
{
	const char *perms;
	char *p;

	*lo = strtoul(l, &p, 16);
	if (*p != '-')
		return 0;
	*hi = strtoul(p + 1, &p, 16);
	perms = p + 1;
	if (*p != ' ' || strnlen(perms, 4) < 4 || memchr(perms, '\n', 4))
		return 0;
	*prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) | (perms[2] == 'x' ? PROT_EXEC : 0);
	*shared = perms[3] == 's';
	p = skip_fields(perms, 4); /* perms, offset, device, inode: then the path, if the line has one */
	while (*p == ' ')
		p++;
	*ours = !strncmp(p, "/memfd:xroce-mr", 15);
	return 1;
}

/* pages_ok checks the mappings over [s, e) before a registration moves them, as
 * ib_umem_get's get_user_pages would: EFAULT where a page is unmapped or
 * unreadable, or, for a region the device may write (writable), not writable
 * (FOLL_WRITE). Pages of a shared mapping (a file mapped MAP_SHARED, shared
 * anonymous or SysV memory) are moved like the others, which ends their sharing
 * (rdma_rxe pins them in place): it says so once (docs/verbs-library.md). */
static int pages_ok(const char *maps, uintptr_t s, uintptr_t e, int writable)
{
	static int said;
	unsigned long lo, hi;
	int prot, shared, ours;
	uintptr_t p = s;
	const char *l;

	for (l = maps; l && *l && p < e; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		if (!maps_line(l, &lo, &hi, &prot, &shared, &ours) || hi <= p)
			continue;
		if (lo > p)
			return EFAULT; /* a hole */
		if (!(prot & PROT_READ) || (writable && !(prot & PROT_WRITE)))
			return EFAULT;
		if (shared && !ours && !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
			warnx("ibv_reg_mr: the pages [%#lx, %#lx) are a shared mapping (a MAP_SHARED file, shared or SysV memory): xroce moves registered pages onto its own memory, so from now on this process and the others sharing them no longer see each other's writes there (rdma_rxe pins them in place)",
			      (unsigned long)s, (unsigned long)e);
		p = hi;
	}
	return p < e ? EFAULT : 0;
}

/* restore_prot gives the pages [s, e), just moved onto a memfd mapped read-write,
 * their protections of before (maps: /proc/self/maps read before the move), so a
 * read-only or executable page stays so. */
static void restore_prot(const char *maps, uintptr_t s, uintptr_t e)
{
	unsigned long lo, hi;
	int prot, shared, ours;
	const char *l;

	for (l = maps; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		if (!maps_line(l, &lo, &hi, &prot, &shared, &ours) || hi <= s || lo >= e || prot == (PROT_READ | PROT_WRITE))
			continue;
		lo = lo < s ? s : lo;
		hi = hi > e ? e : hi;
		mprotect((void *)lo, hi - lo, prot);
	}
}

/* prune_retired forgets the retired segments whose pages are no longer their
 * memfd's mapping (unmapped, or mapped anew), and those made private at a fork;
 * segs_lock is held. */
static void prune_retired(void)
{
	struct seg **pp = &retired, *g;
	struct vma *v = NULL;
	size_t n = 0;
	char *maps;

	if (!retired)
		return;
	if ((maps = read_maps()))
		v = parse_vmas(maps, &n);
	while ((g = *pp))
		if (v && still_mapped(v, n, g) && !g->forking) {
			pp = &g->next;
		} else {
			*pp = g->next;
			if (g->fd >= 0)
				close(g->fd);
			free(g);
		}
	free(v);
	free(maps);
}

/* revive takes back the retired segment holding the page at p, whose pages are
 * still its memfd's, for a new registration: no copy of the pages (which would lose
 * what other threads write to them meanwhile). NULL when there is none; segs_lock is
 * held, prune_retired ran. */
static struct seg *revive(uintptr_t p)
{
	struct seg **pp, *g;

	for (pp = &retired; (g = *pp); pp = &g->next)
		if (p >= g->start && p < g->start + g->len && g->fd >= 0) {
			*pp = g->next;
			g->refs = 1;
			g->next = segs;
			segs = g;
			return g;
		}
	return NULL;
}

/* fork_prepare (the parent, before the fork) gives the forking thread's own stack
 * segments private copies, so that the frames both processes write as soon as the
 * fork returns are each their own. segs_lock stays held through the fork. */
static void fork_prepare(void)
{
	struct seg *g;

	pthread_mutex_lock(&segs_lock);
	for (g = segs; g; g = g->next)
		if ((g->forking = on_own_stack(g->start, g->start + g->len)) && replace_stack_pages(g->start, g->len, -1))
			g->forking = 0; /* no copy: the pages stay shared */
	prune_retired();
	for (g = retired; g; g = g->next) /* the forking thread's: private for good (no daemon maps them) */
		if (on_own_stack(g->start, g->start + g->len) && !replace_stack_pages(g->start, g->len, -1))
			g->forking = 1;
}

/* fork_parent moves the forking thread's stack segments back onto their memfds,
 * with what the parent wrote meanwhile (the daemon's writes meanwhile are lost). */
static void fork_parent(void)
{
	struct seg *g;
	int err;

	for (g = segs; g; g = g->next)
		if (g->forking && (err = replace_stack_pages(g->start, g->len, g->fd)))
			warnx("fork: a registered region on this thread's stack could not be shared again with the daemon "
			      "(%s): the daemon no longer sees its writes",
			      strerror(err));
	prune_retired(); /* the retired ones made private above are anonymous memory again */
	pthread_mutex_unlock(&segs_lock);
}

/* fork_child gives every other segment private anonymous copies: the child's
 * writes are its own, as a kernel HCA's registered pages are copied for a child,
 * and neither the parent's nor the daemon's later writes show in the child. */
static void fork_child(void)
{
	struct seg *g;

	for (g = segs; g; g = g->next)
		if (!g->forking)
			replace_pages(g->start, g->len, -1);
	for (g = retired; g; g = g->next)
		if (!g->forking)
			replace_pages(g->start, g->len, -1);
	pthread_mutex_unlock(&segs_lock);
}

/* segs_init runs once, before the first page moves. */
static void segs_init(void)
{
	find_main_stack();
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* seg_at returns the segment holding the page at p, or NULL; segs_lock is held. */
static struct seg *seg_at(uintptr_t p)
{
	struct seg *g;

	for (g = segs; g && !(p >= g->start && p < g->start + g->len); g = g->next)
		;
	return g;
}

/* seg_gap_end returns where the pages from p on that no segment holds end: the
 * start of the first segment in (p, e), else e; segs_lock is held. */
static uintptr_t seg_gap_end(uintptr_t p, uintptr_t e)
{
	struct seg *g;

	for (g = segs; g; g = g->next)
		if (g->start > p && g->start < e)
			e = g->start;
	return e;
}

/* high_fd moves a memfd above the soft RLIMIT_NOFILE the process had, which it
 * raises to the hard limit on first use (as Go's runtime does): a segment holds
 * one descriptor for as long as a region uses its pages, where rdma_rxe's regions
 * hold none, so they must not take the application's own (a select(2) user keeps
 * them under FD_SETSIZE) nor end at its 1024th. fd, or the new one. */
static int high_fd(int fd)
{
	static rlim_t base; /* the soft limit before, once raised */
	struct rlimit rl;
	int h;

	if (fd < 0)
		return fd;
	if (!base) {
		base = RLIM_INFINITY; /* not raised: no room above */
		if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
			rlim_t was = rl.rlim_cur;

			rl.rlim_cur = rl.rlim_max;
			if (!setrlimit(RLIMIT_NOFILE, &rl))
				base = was;
		}
	}
	if (base == RLIM_INFINITY || base > INT_MAX || (h = fcntl(fd, F_DUPFD_CLOEXEC, (int)base)) < 0)
		return fd;
	close(fd);
	return h;
}

/* huge_pages says, once, when the pages [s, e) of a move were huge pages (a
 * MAP_HUGETLB or hugetlbfs mapping, as /proc/self/maps names it): err EINVAL means
 * the move could not split one (a region of part of a huge page), 0 that they are
 * small pages now. rdma_rxe pins huge pages in place. */
static void huge_pages(const char *maps, uintptr_t s, uintptr_t e, int err)
{
	static int said_fail, said_moved;
	unsigned long lo, hi;
	const char *l;

	if (err && err != EINVAL)
		return;
	for (l = maps; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		const char *nl = strchr(l, '\n');
		size_t n = nl ? (size_t)(nl - l) : strlen(l);

		if (sscanf(l, "%lx-%lx", &lo, &hi) != 2 || hi <= s || lo >= e ||
		    !(memmem(l, n, "anon_hugepage", 13) || memmem(l, n, "/hugepages", 10) || memmem(l, n, "hugetlbfs", 9)))
			continue;
		if (err && !__atomic_exchange_n(&said_fail, 1, __ATOMIC_RELAXED))
			warnx("ibv_reg_mr: the pages [%#lx, %#lx) lie on huge pages (MAP_HUGETLB or hugetlbfs), which xroce cannot move onto its shared memory in part: register whole huge pages, or memory of normal (or transparent huge) pages; rdma_rxe pins them in place",
			      (unsigned long)s, (unsigned long)e);
		if (!err && !__atomic_exchange_n(&said_moved, 1, __ATOMIC_RELAXED))
			warnx("ibv_reg_mr: the pages [%#lx, %#lx) were huge pages (MAP_HUGETLB or hugetlbfs); xroce moved them onto its shared memory, of normal pages, where rdma_rxe pins them in place",
			      (unsigned long)s, (unsigned long)e);
		return;
	}
}

/*
 * seg_new moves the pages [s, e), which no segment holds, onto a new segment: a
 * sealed memfd gets the pages' contents and is mapped MAP_SHARED|MAP_FIXED over
 * them, so the application keeps its data at its addresses and the daemon can map
 * the same pages. segs_lock is held.
 */
static struct seg *seg_new(uintptr_t s, uintptr_t e, const char *maps, int *err)
{
	struct seg *g = calloc(1, sizeof(*g));
	size_t len = e - s;
	int fd = high_fd(memfd_create("xroce-mr", MFD_CLOEXEC | MFD_ALLOW_SEALING));
	struct stat st;

	if (!g || fd < 0 || ftruncate(fd, len) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		*err = g ? errno : ENOMEM;
		goto fail;
	}
	if (on_own_stack(s, e)) {
		*err = replace_stack_pages(s, len, fd);
	} else { /* other threads' writes to the pages wait for the move (wprotect.c); a
		  * signal handler of this thread's writing them would wait for itself */
		sigset_t all, old;
		int wp;

		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		wp = wp_begin(s, len);
		*err = replace_pages(s, len, fd);
		if (wp)
			wp_end(s, len, !*err);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	huge_pages(maps, s, e, *err);
	if (*err)
		goto fail;
	restore_prot(maps, s, e);
	if (fstat(fd, &st) < 0) {
		*err = errno;
		goto fail;
	}
	g->start = s;
	g->len = len;
	g->fd = fd;
	g->ino = st.st_ino;
	g->refs = 1;
	g->next = segs;
	segs = g;
	return g;
fail:
	if (fd >= 0)
		close(fd);
	free(g);
	return NULL;
}

/*
 * segs_cover takes a reference on the segments holding the pages [s, e), moving
 * the pages no segment holds yet onto new ones, and describes them as the pieces
 * of a registration: gs[i] and pc[i], in address order, *n of them (at most
 * XROCE_MR_PIECES). Several regions may share pages (two buffers of one malloc'd
 * block): a region's pages then lie partly on an earlier region's memfd and partly
 * on a new one, and the daemon maps the pieces side by side. 0, or an errno with
 * no reference taken.
 */
int segs_cover(uintptr_t s, uintptr_t e, int writable, struct seg **gs, int *n, struct xroce_mr_piece *pc)
{
	uintptr_t p = s, end;
	struct seg *g;
	char *maps;
	int err = 0;

	pthread_once(&init_once, segs_init);
	*n = 0;
	pthread_mutex_lock(&segs_lock);
	prune_retired();
	maps = read_maps();
	if (!maps)
		err = errno ? errno : ENOMEM;
	else
		err = pages_ok(maps, s, e, writable);
	while (p < e && !err) {
		if (*n == XROCE_MR_PIECES) {
			warnx("ibv_reg_mr: the pages [%#lx, %#lx) lie on more than %d earlier registrations' pages",
			      (unsigned long)s, (unsigned long)e, XROCE_MR_PIECES);
			err = EINVAL;
			break;
		}
		if ((g = seg_at(p))) {
			g->refs++;
		} else if (!(g = revive(p)) && !(g = seg_new(p, seg_gap_end(p, e), maps, &err))) {
			break;
		}
		end = g->start + g->len < e ? g->start + g->len : e;
		pc[*n].len = end - p;
		pc[*n].fd_off = p - g->start;
		gs[(*n)++] = g;
		p = end;
	}
	pthread_mutex_unlock(&segs_lock);
	free(maps);
	if (err == EMFILE)
		warnx("ibv_reg_mr: out of file descriptors: xroce holds one for each registered page range (rdma_rxe none); "
		      "raise the limit (ulimit -n; the hard limit bounds it)");
	if (err) {
		while (*n)
			seg_put(gs[--*n]);
	}
	return err;
}

/* seg_put drops a region's reference; the last one retires the segment: its pages
 * stay on the memfd, the application's memory; a later registration of them takes
 * it back (revive), and a fork gives the child private copies of them as of a live
 * segment's. The memfds of the newest maxRevivable retired segments stay open. */
void seg_put(struct seg *g)
{
	enum { maxRevivable = 64 };
	struct seg **pp;
	int n = 0;

	pthread_mutex_lock(&segs_lock);
	if (--g->refs == 0) {
		for (pp = &segs; *pp; pp = &(*pp)->next)
			if (*pp == g) {
				*pp = g->next;
				break;
			}
		g->forking = 0;
		g->next = retired;
		retired = g;
		for (g = retired; g; g = g->next)
			if (g->fd >= 0 && ++n > maxRevivable) {
				close(g->fd);
				g->fd = -1;
			}
	}
	pthread_mutex_unlock(&segs_lock);
}

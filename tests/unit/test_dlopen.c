/* SPDX-License-Identifier: MIT */
/*
 * libhugepool stays dlopen()able from a program that is not linked with jemalloc (JNI, Python
 * ctypes, plugins): loading it brings no jemalloc in; libhugepool-heap, which needs Debian's
 * initial-exec-TLS libjemalloc, either loads or fails with the documented static TLS error.
 * This program links neither library (see its rule in the Makefile).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int find_jemalloc(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	if (strstr(info->dlpi_name, "libjemalloc"))
		*(int *)data = 1;
	return 0;
}

static int jemalloc_loaded(void)
{
	int found = 0;

	dl_iterate_phdr(find_jemalloc, &found);
	return found;
}

static void lib_path(char *buf, size_t len, const char *name)
{
	const char *build = getenv("HP_BUILD");

	snprintf(buf, len, "%s/%s", build && *build ? build : "build", name);
}

static void test_dlopen_libhugepool(void **state)
{
	char path[512];
	void *h;
	const char *(*strerror_fn)(int);

	(void)state;
	assert_false(jemalloc_loaded());
	lib_path(path, sizeof(path), "libhugepool.so.0");
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		fail_msg("dlopen %s: %s", path, dlerror());
	strerror_fn = (const char *(*)(int))dlsym(h, "hp_strerror");
	assert_non_null(strerror_fn);
	assert_non_null(strerror_fn(-2));
	assert_false(jemalloc_loaded()); /* libhugepool does not depend on jemalloc */
	assert_int_equal(dlclose(h), 0);
}

/* The heap library's caveat (hugepool-heap(3)): it loads, or fails for want of static TLS. */
static void test_dlopen_heap_caveat(void **state)
{
	char path[512];
	void *lib, *h;

	(void)state;
	/* its dependency first, by path: the build directory is not on the search path */
	lib_path(path, sizeof(path), "libhugepool.so.0");
	lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
	assert_non_null(lib);
	lib_path(path, sizeof(path), "libhugepool-heap.so.0");
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h) {
		printf("dlopen %s: loaded (this glibc had static TLS to spare)\n", path);
		assert_true(jemalloc_loaded());
		assert_non_null(dlsym(h, "hp_heap_create"));
		dlclose(h);
	} else {
		const char *err = dlerror();

		printf("dlopen %s: %s\n", path, err);
		if (!strstr(err, "static TLS"))
			fail_msg("dlopen %s failed for another reason than static TLS: %s", path, err);
	}
	dlclose(lib);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dlopen_libhugepool),
		cmocka_unit_test(test_dlopen_heap_caveat),
	};

	return cmocka_run_group_tests_name("dlopen", tests, NULL, NULL);
}

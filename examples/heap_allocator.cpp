// SPDX-License-Identifier: MIT
//
// heap_allocator.cpp - a C++ allocator over a libhugepool-heap heap in a few lines, so standard
// containers keep their elements in pre-faulted hugepage memory leased from hugepoold. Build:
//   c++ -o heap_allocator heap_allocator.cpp $(pkg-config --cflags --libs hugepool-heap)
// Usage: heap_allocator [SOCKET [CLASS]]   (CLASS: buffers larger than the largest element array)
#include <cstdio>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include <hugepool-heap.h>

template <class T> struct heap_allocator {
	using value_type = T;
	hp_heap *heap;

	explicit heap_allocator(hp_heap *h) noexcept : heap(h) {}
	template <class U> heap_allocator(const heap_allocator<U> &o) noexcept : heap(o.heap) {}
	T *allocate(std::size_t n)
	{
		if (void *p = hp_heap_aligned_alloc(heap, alignof(T), n * sizeof(T)))
			return static_cast<T *>(p);
		throw std::bad_alloc();
	}
	void deallocate(T *p, std::size_t) noexcept { hp_heap_free(heap, p); }
	template <class U> bool operator==(const heap_allocator<U> &o) const noexcept { return heap == o.heap; }
	template <class U> bool operator!=(const heap_allocator<U> &o) const noexcept { return heap != o.heap; }
};

int main(int argc, char **argv)
{
	const char *socket_path = argc > 1 ? argv[1] : nullptr;
	const char *class_name = argc > 2 ? argv[2] : "small";
	hp_conn *c;
	hp_heap *h;
	int r = hp_connect(socket_path, &c);

	if (r == 0 && (r = hp_heap_create(c, class_name, 64u << 20, 0, &h)) < 0)
		hp_disconnect(c);
	if (r < 0) {
		std::fprintf(stderr, "heap_allocator: %s\n", hp_strerror(r));
		return 1;
	}
	{
		using pair_alloc = heap_allocator<std::pair<const int, long>>;
		std::unordered_map<int, long, std::hash<int>, std::equal_to<int>, pair_alloc> squares(
			16, std::hash<int>(), std::equal_to<int>(), pair_alloc(h));
		std::vector<int, heap_allocator<int>> v{ heap_allocator<int>(h) };

		for (int i = 0; i < 10000; i++) {
			squares[i] = (long)i * i;
			v.push_back(i);
		}
		std::printf("%zu squares, 9999^2 = %ld, %zu ints in an array of %zu bytes at %p\n", squares.size(),
			    squares[9999], v.size(), hp_heap_usable_size(h, v.data()), static_cast<void *>(v.data()));
	} // the containers give their memory back before the heap goes
	hp_heap_destroy(h);
	hp_disconnect(c);
	return 0;
}

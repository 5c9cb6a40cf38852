// ctypeslib.c: a C library that Python calls through ctypes (callclib.py
// loads it with dlopen): keep_item keeps 40 bytes per call.
#include <stdlib.h>

static void *kept[256];
static int n;

void keep_item(int id)
{
	kept[n++ % 256] = malloc(40); // 40 bytes per call
	(void)id;
}

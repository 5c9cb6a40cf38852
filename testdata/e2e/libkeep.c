// libkeep.c: a shared library that libmain links. Its allocation happens
// in a static function, which the main program cannot name and reaches
// only through lib_entry: 40 bytes kept per call.
#include <stdlib.h>

static void *kept[256];
static int n;

static void lib_keep(int id)
{
	kept[n++ % 256] = malloc(40); // 40 bytes per call
	(void)id;
}

void lib_entry(int id)
{
	lib_keep(id);
}

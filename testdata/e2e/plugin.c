// plugin.c: a plugin that libmain loads with dlopen() at run time: 56
// bytes kept per call, in a static function.
#include <stdlib.h>

static void *kept[256];
static int n;

static void plugin_keep(int id)
{
	kept[n++ % 256] = malloc(56); // 56 bytes per call
	(void)id;
}

void plugin_entry(int id)
{
	plugin_keep(id);
}

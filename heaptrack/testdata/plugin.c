/* plugin.c: a library that dlhost.c loads with dlopen. Each round keeps
 * one block of 48 bytes from plugin_alloc, then calls plugin_tick(i). */
#include <stdlib.h>

static void *volatile sink;

__attribute__((noinline)) void *plugin_alloc(void) { return malloc(48); }
__attribute__((noinline)) void plugin_tick(int i) { sink = (void *)(long)i; }

void plugin_round(int i)
{
	sink = plugin_alloc();
	plugin_tick(i);
}

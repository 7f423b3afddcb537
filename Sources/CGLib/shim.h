#ifndef VEIL_CGLIB_H
#define VEIL_CGLIB_H
/* GLib, GObject and GIO alone: main loops, sources, signals, sockets and TLS. What the room server
 * and VeilGLib need, without GStreamer (which includes these same headers for the media code). */
#include <glib.h>
#include <glib-object.h>
#include <gio/gio.h>
#endif

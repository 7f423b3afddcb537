/* Xlib, for the window `veil call --out window` shows its picture in (VeilMedia's X11Window):
 * a window of Veil's own that GStreamer's X video sinks draw into, so that it can be kept on top
 * and resized. Debian's libx11-dev. */
#include <X11/Xlib.h>
#include <X11/Xutil.h>

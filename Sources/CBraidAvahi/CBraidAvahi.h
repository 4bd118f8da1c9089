// The Avahi client library (Debian's libavahi-client-dev): browsing, resolving and publishing
// DNS-SD services through the system's avahi-daemon over D-Bus, on a threaded poll.
#ifndef CBRAIDAVAHI_H
#define CBRAIDAVAHI_H

#include <avahi-client/client.h>
#include <avahi-client/lookup.h>
#include <avahi-client/publish.h>
#include <avahi-common/alternative.h>
#include <avahi-common/error.h>
#include <avahi-common/malloc.h>
#include <avahi-common/strlst.h>
#include <avahi-common/thread-watch.h>

#endif

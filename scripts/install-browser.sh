#!/bin/sh
# Install Debian's headless-capable Chromium (and a font with Chinese glyphs) for the
# browser tests of the web page (tests/ui/test_ui_browser.py). Playwright drives this
# browser; `playwright install` is never run, it downloads a build of its own.
# Does nothing when /usr/bin/chromium is there; needs root and apt-get otherwise.
set -eu
if [ -x /usr/bin/chromium ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install-browser: /usr/bin/chromium is missing and this is not root: run" \
        "'apt-get install chromium' as root" >&2
    exit 2
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-browser: /usr/bin/chromium is missing and there is no apt-get" >&2
    exit 2
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends chromium fonts-wqy-microhei

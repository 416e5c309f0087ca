#!/usr/bin/env python3
"""vvl_messages.py LOG... - print the set of Khronos validation messages in
the log files VK_LAYER_KHRONOS_validation wrote, one normalised message a
line, with how often each occurred.

The layer tests compare the SET of messages a program causes with and
without pcache's layer: the same program, run twice, creates objects at
other addresses and in other numbers (a frame more or less before it
exits), so handles, addresses and the object lists are normalised away and
repeats collapse. What is left is the VUID, the severity and the text.

Debian 12 ships the validation layer 1.3.239. Without a debug messenger of
its own a program's messages still reach the layer's default callback
(debug_action VK_DBG_LAYER_ACTION_LOG_MSG), which prints them to stdout
unless a settings file (VK_LAYER_SETTINGS_PATH) names log_filename; the
file is opened with "w" by every VkInstance, so one file per run, and one
process with one instance per run, or messages are lost."""
import re
import sys

# One message starts with its VUID and "(SEVERITY / TYPE): msgNum: N - ".
_HEADER = re.compile(r'^(?P<vuid>\S+)\((?P<sev>[A-Z]+) / (?P<kind>[A-Z]+)\): '
                     r'msgNum: -?\d+ - (?P<text>.*)$')
# The default callback appends the objects again ("Objects: 2" and one
# "[i] 0x..., type: t, name: n" line each): already in the text.
_OBJECTS = re.compile(r'^\s+(Objects: \d+|\[\d+\] 0x[0-9a-fA-F]+, type: \d+, name: .*)$')
_HEX = re.compile(r'0x[0-9a-fA-F]+')
# Which object of a message ("Object 1:") and counts of objects in a list.
_OBJECT_INDEX = re.compile(r'Object \d+:')

SETTINGS = """\
khronos_validation.debug_action = VK_DBG_LAYER_ACTION_LOG_MSG
khronos_validation.report_flags = error,warn,perf,info
khronos_validation.enable_message_limit = false
khronos_validation.log_filename = {log}
"""


# The one informational message the layer prints at vkCreateInstance: it
# proves the layer ran and wrote to the file. Info messages are logged for
# it and are not part of the set.
STATUS_VUID = 'UNASSIGNED-khronos-validation-createinstance-status-message'


def settings_text(log_path):
    """The vk_layer_settings.txt that makes the layer log every error,
    warning and performance message, unlimited, to log_path (and its
    informational ones, for STATUS_VUID)."""
    return SETTINGS.format(log=log_path)


def messages(text):
    """Yields each message of a log as (vuid, severity, type, text): the
    header's text plus its continuation lines, without the object list."""
    cur = None
    for line in text.splitlines():
        m = _HEADER.match(line)
        if m:
            if cur:
                yield cur[0], cur[1], cur[2], '\n'.join(cur[3])
            cur = (m.group('vuid'), m.group('sev'), m.group('kind'), [m.group('text')])
        elif cur and line.strip() and not _OBJECTS.match(line):
            cur[3].append(line.rstrip())
        elif not cur and line.strip():
            # Text before the first header: keep it visible, never drop it.
            cur = ('UNPARSED', '?', '?', [line.rstrip()])
    if cur:
        yield cur[0], cur[1], cur[2], '\n'.join(cur[3])


def normalise(vuid, sev, kind, text):
    """One message as a comparable line: handles, addresses and message ids
    (all printed in hex) become 0x?, object numbers go."""
    text = _HEX.sub('0x?', text)
    text = _OBJECT_INDEX.sub('Object:', text)
    text = text.replace('\n', ' \\n ')
    return f'{vuid} ({sev}/{kind}): {text}'


def message_counts(text):
    """{normalised message: occurrences} of one log's errors, warnings and
    performance messages, and under STATUS_VUID how often the layer said
    it was active."""
    counts = {}
    for msg in messages(text):
        if msg[0] == STATUS_VUID:
            key = STATUS_VUID
        elif msg[1] == 'INFO':
            continue
        else:
            key = normalise(*msg)
        counts[key] = counts.get(key, 0) + 1
    return counts


def read_counts(paths):
    counts = {}
    for path in paths:
        try:
            with open(path, encoding='utf-8', errors='replace') as f:
                text = f.read()
        except FileNotFoundError:
            continue
        for key, n in message_counts(text).items():
            counts[key] = counts.get(key, 0) + n
    return counts


def main(argv):
    if len(argv) < 2 or argv[1] in ('-h', '--help'):
        print(__doc__.split('\n\n')[0])
        return 0 if len(argv) >= 2 else 2
    counts = read_counts(argv[1:])
    for key in sorted(counts):
        print(f'{counts[key]:6d} {key}')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))

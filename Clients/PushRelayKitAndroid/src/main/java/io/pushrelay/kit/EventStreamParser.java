package io.pushrelay.kit;

import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.List;

/**
 * Server-Sent Events, fed bytes as they arrive: lines end in LF, CRLF or CR; {@code event:} and
 * {@code data:} fields (several data lines joined by LF); a blank line ends an event; lines
 * starting with a colon are comments (the relay's heartbeats).
 */
final class EventStreamParser {
    /** One event: its name ({@code message} when none is given) and data. */
    static final class Event {
        final String name;
        final String data;

        Event(String name, String data) {
            this.name = name;
            this.data = data;
        }
    }

    private final ByteArrayOutputStream line = new ByteArrayOutputStream();
    private boolean afterCarriageReturn;
    private String name;
    private StringBuilder data;

    /** The events {@code count} more bytes complete. */
    List<Event> feed(byte[] bytes, int count) {
        List<Event> events = new ArrayList<Event>();
        for (int index = 0; index < count; index++) {
            byte value = bytes[index];
            if (value == '\n' && afterCarriageReturn) {
                afterCarriageReturn = false;  // the LF of a CRLF
                continue;
            }
            afterCarriageReturn = value == '\r';
            if (value == '\n' || value == '\r') {
                endLine(events);
            } else {
                line.write(value);
            }
        }
        return events;
    }

    private void endLine(List<Event> events) {
        String text = new String(line.toByteArray(), Transport.UTF8);
        line.reset();
        if (text.isEmpty()) {
            if (data != null) events.add(new Event(name == null ? "message" : name, data.toString()));
            name = null;
            data = null;
            return;
        }
        if (text.startsWith(":")) return;
        int colon = text.indexOf(':');
        String field = colon < 0 ? text : text.substring(0, colon);
        String value = colon < 0 ? "" : text.substring(colon + 1);
        if (value.startsWith(" ")) value = value.substring(1);
        if (field.equals("event")) {
            name = value;
        } else if (field.equals("data")) {
            if (data == null) {
                data = new StringBuilder(value);
            } else {
                data.append('\n').append(value);
            }
        }
    }
}

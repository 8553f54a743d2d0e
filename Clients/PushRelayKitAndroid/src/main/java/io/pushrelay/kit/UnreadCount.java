package io.pushrelay.kit;

import androidx.annotation.NonNull;
import androidx.annotation.Nullable;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.json.JSONArray;
import org.json.JSONException;
import org.json.JSONObject;

/**
 * A user's unread replies: the total and the count of each ticket with unread replies.
 * Immutable. Counts are uncapped, as the relay keeps them; {@link #badgeText()} applies the
 * display rule ("99+" above 99).
 */
public final class UnreadCount {
    /** Nothing unread. */
    @NonNull
    public static final UnreadCount ZERO = new UnreadCount(0, Collections.<String, Integer>emptyMap());

    private final int total;
    private final Map<String, Integer> tickets;

    /**
     * @param total every unread reply of the user, across tickets
     * @param tickets unread replies by ticket id (copied; tickets at 0 are left out)
     */
    public UnreadCount(int total, @NonNull Map<String, Integer> tickets) {
        this.total = total;
        Map<String, Integer> copy = new HashMap<String, Integer>();
        for (Map.Entry<String, Integer> entry : tickets.entrySet()) {
            if (entry.getValue() != null && entry.getValue() != 0) copy.put(entry.getKey(), entry.getValue());
        }
        this.tickets = Collections.unmodifiableMap(copy);
    }

    /** Every unread reply of the user, across tickets. */
    public int getTotal() {
        return total;
    }

    /** Unread replies by ticket id; tickets with none are absent. Unmodifiable. */
    @NonNull
    public Map<String, Integer> getTickets() {
        return tickets;
    }

    /** The unread replies of one ticket (0 when it has none). */
    public int unread(@NonNull String ticketId) {
        Integer count = tickets.get(ticketId);
        return count == null ? 0 : count;
    }

    /** What a badge shows: {@code null} at 0 (no badge), the number up to 99, else "99+". */
    @Nullable
    public String badgeText() {
        return badgeText(99);
    }

    /**
     * What a badge shows: {@code null} at 0 (no badge), the number up to {@code cap}, else
     * "{@code cap}+". A cap of 0 or less shows the number as it is.
     */
    @Nullable
    public String badgeText(int cap) {
        if (total <= 0) return null;
        if (cap > 0 && total > cap) return cap + "+";
        return String.valueOf(total);
    }

    /** Reads the relay's {@code {"total":N,"tickets":[{"ticket_id","unread"}]}}. */
    static UnreadCount parse(String text) throws JSONException {
        JSONObject object = new JSONObject(text);
        if (!(object.opt("total") instanceof Number)) throw new JSONException("no total");
        JSONArray list = object.getJSONArray("tickets");
        Map<String, Integer> tickets = new HashMap<String, Integer>();
        for (int index = 0; index < list.length(); index++) {
            JSONObject ticket = list.getJSONObject(index);
            Object id = ticket.opt("ticket_id");
            Object unread = ticket.opt("unread");
            if (!(id instanceof String) || !(unread instanceof Number)) throw new JSONException("a ticket without ticket_id or unread");
            Integer before = tickets.get(id);
            tickets.put((String) id, (before == null ? 0 : before) + ((Number) unread).intValue());
        }
        return new UnreadCount(object.getInt("total"), tickets);
    }

    /** The sum of the tickets' counts. */
    int ticketSum() {
        int sum = 0;
        for (Integer count : tickets.values()) sum += count;
        return sum;
    }

    /** This count with one ticket removed and the total the relay gave. */
    UnreadCount withoutTicket(String ticketId, int newTotal) {
        Map<String, Integer> copy = new HashMap<String, Integer>(tickets);
        copy.remove(ticketId);
        return new UnreadCount(newTotal, copy);
    }

    @Override
    public boolean equals(Object other) {
        if (this == other) return true;
        if (!(other instanceof UnreadCount)) return false;
        UnreadCount count = (UnreadCount) other;
        return total == count.total && tickets.equals(count.tickets);
    }

    @Override
    public int hashCode() {
        return 31 * total + tickets.hashCode();
    }

    /** "3 (ticket 5: 2, ticket 7: 1)", tickets in id order. */
    @Override
    public String toString() {
        if (tickets.isEmpty()) return String.valueOf(total);
        List<String> ids = new ArrayList<String>(tickets.keySet());
        Collections.sort(ids);
        StringBuilder text = new StringBuilder().append(total).append(" (");
        for (int index = 0; index < ids.size(); index++) {
            if (index > 0) text.append(", ");
            text.append("ticket ").append(ids.get(index)).append(": ").append(tickets.get(ids.get(index)));
        }
        return text.append(')').toString();
    }
}

package io.pushrelay.kit;

import java.util.ArrayList;
import java.util.List;

/**
 * A clock that moves only when the test says: the counter's waits end when the test advances it,
 * and the test reads when each waiting thread wants to wake ({@link #deadlines()}).
 */
final class ManualClock implements Clock {
    private long now = 1_000_000;
    private final List<Long> sleepers = new ArrayList<>();

    @Override
    public synchronized long now() {
        return now;
    }

    @Override
    public synchronized void sleepUntil(long deadline) throws InterruptedException {
        Long entry = deadline;
        sleepers.add(entry);
        notifyAll();
        try {
            while (now < deadline) wait();
        } finally {
            sleepers.remove(entry);
            notifyAll();
        }
    }

    synchronized void advance(long millis) {
        now += millis;
        notifyAll();
    }

    /** Moves the clock to {@code deadline} (when it is later). */
    synchronized void advanceTo(long deadline) {
        now = Math.max(now, deadline);
        notifyAll();
    }

    /** The deadlines of the threads waiting now. */
    synchronized List<Long> deadlines() {
        return new ArrayList<>(sleepers);
    }

    /** The deadlines of the threads waiting for a time (not for ever: a counter with nothing to do). */
    synchronized List<Long> finiteDeadlines() {
        List<Long> finite = new ArrayList<>();
        for (Long deadline : sleepers) if (deadline != Long.MAX_VALUE) finite.add(deadline);
        return finite;
    }

    /** Waits until exactly one thread waits for a time; its deadline. */
    long awaitSleeper() {
        long[] found = new long[1];
        Eventually.eventually("one thread waiting on the clock (" + deadlines() + ")", () -> {
            List<Long> waiting = finiteDeadlines();
            if (waiting.size() != 1) return false;
            found[0] = waiting.get(0);
            return true;
        });
        return found[0];
    }

    /**
     * Waits until the only thread waiting for a time waits until {@code now() + millis}: a
     * counter's runner replaced by a change of mode may still wait for a moment, so the test waits
     * for the one it expects rather than taking the first it sees.
     */
    void awaitSleeperIn(long millis) {
        long deadline = now() + millis;
        Eventually.eventually("one thread waiting until now + " + millis + " ms (now " + now() + ", waiting: " + deadlines() + ")",
            () -> finiteDeadlines().equals(List.of(deadline)));
    }
}

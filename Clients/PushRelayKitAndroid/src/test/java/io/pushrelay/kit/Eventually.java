package io.pushrelay.kit;

import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/** The tests' one way to wait for a condition. */
final class Eventually {
    /** The ceiling of every wait: only a hang reaches it (what is waited for takes seconds at most on an idle machine). */
    static final long HANG_SECONDS = 300;

    private Eventually() {}

    /** Waits for {@code condition}; fails only when it is still false after {@link #HANG_SECONDS}. */
    static void eventually(String what, BooleanSupplier condition) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(HANG_SECONDS);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) throw new AssertionError("still not true after " + HANG_SECONDS + " s: " + what);
            try {
                Thread.sleep(20);
            } catch (InterruptedException error) {
                Thread.currentThread().interrupt();
                throw new AssertionError(error);
            }
        }
    }
}

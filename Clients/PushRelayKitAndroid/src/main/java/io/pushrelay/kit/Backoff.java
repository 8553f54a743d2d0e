package io.pushrelay.kit;

import java.util.Random;

/** Reconnect delays of the live stream: 1, 2, 4, 8, 16, then 30 seconds, each within ±20 %. */
final class Backoff {
    private final Random random;
    private int attempt;

    Backoff(Random random) {
        this.random = random;
    }

    /** The next delay, in milliseconds. */
    long next() {
        long base = Math.min(30000L, 1000L << attempt);
        attempt = Math.min(attempt + 1, 10);
        return Math.round(base * (0.8 + 0.4 * random.nextDouble()));
    }

    /** After a stream that delivered events: the next delay is 1 s again. */
    void reset() {
        attempt = 0;
    }
}

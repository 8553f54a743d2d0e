package io.pushrelay.kit;

import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

/** Waiting for a call's future; the ceiling only bounds a hang. */
final class Futures {
    private Futures() {}

    static <T> T await(Future<T> future) throws Exception {
        try {
            return future.get(Eventually.HANG_SECONDS, TimeUnit.SECONDS);
        } catch (ExecutionException error) {
            throw new AssertionError("the call failed: " + error.getCause(), error.getCause());
        }
    }

    /** The call's failure, which must be a {@link PushRelayException}. */
    static PushRelayException failure(Future<?> future) throws Exception {
        try {
            future.get(Eventually.HANG_SECONDS, TimeUnit.SECONDS);
        } catch (ExecutionException error) {
            return assertInstanceOf(PushRelayException.class, error.getCause());
        }
        return fail("the call succeeded");
    }
}

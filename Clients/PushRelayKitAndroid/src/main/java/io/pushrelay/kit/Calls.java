package io.pushrelay.kit;

import java.util.concurrent.Callable;
import java.util.concurrent.Executor;
import java.util.concurrent.Future;
import java.util.concurrent.FutureTask;
import java.util.concurrent.RejectedExecutionException;

/** An app's call run on a library thread: a {@link Future} and, optionally, a callback. */
final class Calls {
    private Calls() {}

    /** One call's work, on a library thread. */
    interface Work<T> {
        T run() throws PushRelayException;
    }

    /**
     * Runs {@code work} on {@code executor}; its outcome goes to {@code callback} (if any) through
     * {@code dispatcher} and to the returned future.
     *
     * @throws IllegalStateException after the client was closed
     */
    static <T> Future<T> submit(Executor executor, final SerialDispatcher dispatcher, final Work<T> work,
        final PushRelayCallback<T> callback) {
        FutureTask<T> task = new FutureTask<T>(new Callable<T>() {
            @Override
            public T call() throws PushRelayException {
                final T result;
                try {
                    result = work.run();
                } catch (final PushRelayException error) {
                    if (callback != null) {
                        dispatcher.post(new Runnable() {
                            @Override
                            public void run() {
                                callback.onFailure(error);
                            }
                        });
                    }
                    throw error;
                }
                if (callback != null) {
                    dispatcher.post(new Runnable() {
                        @Override
                        public void run() {
                            callback.onSuccess(result);
                        }
                    });
                }
                return result;
            }
        });
        try {
            executor.execute(task);
        } catch (RejectedExecutionException closed) {
            throw new IllegalStateException("the PushRelayClient is closed", closed);
        }
        return task;
    }
}

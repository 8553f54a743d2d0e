package androidx.annotation;

import static java.lang.annotation.ElementType.ANNOTATION_TYPE;
import static java.lang.annotation.ElementType.FIELD;
import static java.lang.annotation.ElementType.LOCAL_VARIABLE;
import static java.lang.annotation.ElementType.METHOD;
import static java.lang.annotation.ElementType.PACKAGE;
import static java.lang.annotation.ElementType.PARAMETER;

import java.lang.annotation.Documented;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * The value is never null. Compile-only: build.sh compiles the library against it so Kotlin sees the
 * nullability (the class files name androidx.annotation.NonNull), but never packs it; an app has
 * AndroidX's own, or none (an absent annotation class is ignored). Java 7 targets only (no
 * TYPE_USE): the library compiles with --release 7.
 */
@Documented
@Retention(RetentionPolicy.CLASS)
@Target({METHOD, PARAMETER, FIELD, LOCAL_VARIABLE, ANNOTATION_TYPE, PACKAGE})
public @interface NonNull {
}

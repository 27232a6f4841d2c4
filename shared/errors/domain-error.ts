/**
 * The one base of the project's errors (style guide "Typed errors with a stable class"): a stable
 * `class` that tests and metrics match on, the `detail` after it, and the message
 * `<class>: <detail>` (kv-events §10's form). Subclasses set `class` as a field or in their
 * constructor; an error whose message a person reads as is extends PlainMessageError, and one
 * with a form of its own (kvctl's call line) overrides formatMessage().
 */
export abstract class DomainError extends Error {
  abstract readonly class: string;

  constructor(readonly detail: string) {
    super(detail);
    // Error's constructor stores `message` on the instance, which would hide the getter below;
    // a subclass's `class` field is set only after this constructor returns, so the message is
    // derived when read.
    delete (this as { message?: string }).message;
    this.name = new.target.name;
  }

  override get message(): string {
    return this.formatMessage();
  }

  override set message(_ignored: string) {
    // The message is derived from class and detail; an assignment (Error's own, or a library's) is dropped.
  }

  protected formatMessage(): string {
    return `${this.class}: ${this.detail}`;
  }
}

/**
 * A domain error whose message is the detail alone, because a person reads it as is: a CLI's
 * stderr line, a 400's reason. Its `class` is still what code matches on.
 */
export abstract class PlainMessageError extends DomainError {
  protected override formatMessage(): string {
    return this.detail;
  }
}

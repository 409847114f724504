"""What a user does in VS Code's window, as Playwright steps on code-server's workbench."""

from __future__ import annotations

import re
import time

from playwright.sync_api import Page

from tests.support.waiting import wait_until
from tests.vscode.host import STATUS_ITEM

# Ctrl on Linux, where these tests run.
MOD = "Control"


class Workbench:
    def __init__(self, page: Page) -> None:
        self.page = page

    def wait_ready(self) -> None:
        self.page.wait_for_selector(".monaco-workbench", timeout=120_000)
        self.page.wait_for_selector(".statusbar", timeout=60_000)

    # --- status bar and notifications ------------------------------------------------------

    def status_text(self) -> str:
        item = self.page.locator(STATUS_ITEM)
        return item.inner_text() if item.count() else ""

    def status_html(self) -> str:
        item = self.page.locator(STATUS_ITEM)
        return item.inner_html() if item.count() else ""

    def events_today(self) -> int | None:
        """The count the status bar shows ("N today"), None while it shows none."""
        found = re.search(r"(\d+) today", self.status_text())
        return int(found.group(1)) if found else None

    def notifications(self) -> list[tuple[str, str]]:
        """(severity, message) of the toasts on screen and in the notification center."""
        found = []
        for toast in self.page.locator(".notification-list-item").all():
            icon = toast.locator(".notification-list-item-icon").first
            classes = icon.get_attribute("class") or "" if icon.count() else ""
            severity = next(
                (s for s in ("error", "warning", "info") if f"codicon-{s}" in classes), "?"
            )
            message = toast.locator(".notification-list-item-message").first
            found.append((severity, message.inner_text() if message.count() else ""))
        return found

    def errors(self) -> list[str]:
        return [message for severity, message in self.notifications() if severity == "error"]

    def clear_notifications(self) -> None:
        self.command("Notifications: Clear All Notifications")

    # --- commands and editors --------------------------------------------------------------

    def command(self, title: str) -> None:
        """Run a command from the command palette by its title."""
        self._pick("F1", f">{title}", title)
        self.page.keyboard.press("Enter")
        self.page.locator(".quick-input-widget").wait_for(state="hidden")

    def open_file(self, relative: str) -> None:
        name = relative.rsplit("/", 1)[-1]
        self._pick(f"{MOD}+P", relative, name)
        self.page.keyboard.press("Enter")
        self.page.locator(f'.tab[aria-label^="{name}"]').first.wait_for(timeout=30_000)
        self.page.locator(".monaco-editor .view-lines").first.wait_for(state="visible")

    def _pick(self, keys: str, text: str, row: str) -> None:
        """Open a quick input with ``keys``, type ``text`` and wait for a row showing ``row``.
        The list is filtered once, from what is known when it opens (an extension's commands
        appear once it is loaded): each try that shows no such row is closed and made again."""
        box = self.page.locator(".quick-input-widget input")
        found = self.page.locator(".quick-input-list .monaco-list-row", has_text=row).first

        def shown() -> bool:
            self.page.keyboard.press(keys)
            try:
                box.wait_for(state="visible", timeout=5_000)
                box.fill(text)
                found.wait_for(state="visible", timeout=5_000)
                return True
            except Exception:
                self.page.keyboard.press("Escape")
                return False

        wait_until(shown, timeout=60, what=f"{row!r} in the quick input")

    def focus_editor(self) -> None:
        self.page.locator(".editor-group-container.active .monaco-editor .view-lines").click()

    def type_at_end(self, text: str) -> None:
        self.focus_editor()
        self.page.keyboard.press(f"{MOD}+End")
        self.page.keyboard.type(text)

    def save(self) -> None:
        self.page.keyboard.press(f"{MOD}+S")

    def text(self) -> str:
        """The active editor's text as Monaco shows it (every line of a short file), with a
        final newline as a file has."""
        lines = self.page.locator(".editor-group-container.active .monaco-editor .view-line")
        shown = lines.evaluate_all(
            "rows => rows.map(r => [parseFloat(r.style.top), r.textContent])"
        )
        text = "\n".join(line for _top, line in sorted(shown)).replace("\u00a0", " ")
        return text.rstrip("\n") + "\n"

    def dirty(self) -> bool:
        """Whether the active editor has changes not saved."""
        return self.page.locator(".editor-group-container.active .tab.active.dirty").count() > 0

    def problems(self) -> str:
        """The Problems panel's text (opened if closed)."""
        panel = self.page.locator(".markers-panel")
        if not panel.count() or not panel.first.is_visible():
            self.page.keyboard.press(f"{MOD}+Shift+M")
            panel.first.wait_for(state="visible")
        return panel.first.inner_text()

    def quick_fix(self, title: str) -> None:
        """On the first line of the active editor: Ctrl+. and pick ``title``."""
        self.focus_editor()
        self.page.keyboard.press(f"{MOD}+Home")
        widget = self.page.locator(".action-widget")
        item = widget.locator(".action-list-row, .monaco-list-row", has_text=title).first

        def offered() -> bool:
            self.page.keyboard.press(f"{MOD}+.")
            try:
                item.wait_for(state="visible", timeout=3_000)
                return True
            except Exception:
                self.page.keyboard.press("Escape")
                return False

        wait_until(offered, timeout=60, what=f"the quick fix {title!r}")
        # By keyboard, as the widget takes it (a pointer block covers it for clicks).
        focused = widget.locator(".monaco-list-row.focused")
        for _ in range(widget.locator(".monaco-list-row").count()):
            if focused.count() and focused.first.get_attribute("aria-label") == title:
                break
            self.page.keyboard.press("ArrowDown")
        assert focused.first.get_attribute("aria-label") == title
        self.page.keyboard.press("Enter")
        widget.wait_for(state="hidden")

    def close_editors(self) -> None:
        self.command("View: Close All Editors")
        time.sleep(0.2)

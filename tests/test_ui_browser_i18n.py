"""The dashboard in Chinese in Chromium: a browser whose language is Chinese gets Chinese
navigation labels from the sign-in on; the switch in the header (a plain form) changes the
language and keeps it."""

from __future__ import annotations

from tests.test_ui_browser import BROWSER_TESTS, SIZES, browser, page, shoot  # noqa: F401 (fixtures)

pytestmark = BROWSER_TESTS


def test_the_chinese_dashboard_shows_chinese_navigation_and_the_switch_changes_it(
    browser,  # noqa: F811
    live_server,
    admin_user,
    conversation,
):
    from playwright.sync_api import expect

    # Chromium sends Accept-Language from its locale: zh-CN, which Django maps to zh-hans.
    context = browser.new_context(viewport=SIZES[0], locale="zh-CN", java_script_enabled=False)
    context.set_default_timeout(5000)
    page = context.new_page()  # noqa: F811
    page.goto(live_server.url + "/")
    expect(page.locator("h1")).to_have_text("登录")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", "password")
    page.click("main button:has-text('登录')")
    page.wait_for_url(live_server.url + "/")

    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    nav = page.locator("header.site nav a")
    expect(nav).to_have_text(["仪表盘", "会话", "搜索", "记忆", "遗忘", "管理后台"])
    expect(page.locator("h1")).to_have_text("仪表盘")
    expect(page.locator("table.sessions th").first).to_have_text("会话")

    # The switch works without JavaScript (this context has none) and stays on the page.
    page.goto(live_server.url + "/sessions/")
    page.click("header.site form.language button:has-text('English')")
    page.wait_for_url(live_server.url + "/sessions/")
    expect(nav).to_have_text(["Dashboard", "Sessions", "Search", "Memories", "Forget", "Admin"])
    page.goto(live_server.url + "/memories/")
    expect(page.locator("h1")).to_have_text("Long-term memories")
    cookie = {c["name"]: c["value"] for c in context.cookies()}
    assert cookie["django_language"] == "en"
    context.close()


def test_the_admin_switches_language_in_its_header_and_its_memory_list_fits(
    page,  # noqa: F811
    live_server,
    conversation,
):
    """The admin had no language switch, and its long-term memories ran off the right of the
    page at 1440 px (twelve columns, times on one line)."""
    from playwright.sync_api import expect

    from memory.memories import memory_create

    for n in range(3):
        memory_create(
            agent_id="newcomer-agent",
            content=f"The user's {n}th preference: dark mode in every editor, and tabs.",
            memory_type="preference",
            actor="api",
        )
    page.goto(live_server.url + "/admin/memory/longtermmemory/")
    results = page.locator("#changelist .results")
    for language, title in (("简体中文", "长期记忆"), ("English", "Long-term memories")):
        page.click(f"#header form.language button:has-text('{language}')")
        page.wait_for_url(live_server.url + "/admin/memory/longtermmemory/")
        expect(page.locator(".breadcrumbs")).to_contain_text(title)
        width, room = results.evaluate("r => [r.scrollWidth, r.clientWidth]")
        assert width <= room, (language, width, room)
        shoot(page, f"admin_memories_{'zh' if language != 'English' else 'en'}")

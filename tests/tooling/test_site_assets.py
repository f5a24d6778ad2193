"""`make book` after an edit of the course's stylesheet or script serves the edit: Sphinx copies
its static files only when a page is rebuilt, so tools.site_assets --sync (the last step of
`make book`) mirrors tools/theme/ into the built site's _static/ (course.css edited, the site
kept the old one)."""

from __future__ import annotations

from tools import site_assets


def test_sync_puts_the_current_theme_into_a_built_site(tmp_path):
    static = tmp_path / "_static"
    static.mkdir()
    (static / "course.css").write_text("/* the stylesheet of an older build */\n")
    site_assets.sync_built_site(tmp_path)
    for src in site_assets.THEME.iterdir():
        assert (static / src.name).read_bytes() == src.read_bytes(), src.name
    # a second sync finds nothing to do (the files are compared, not copied blindly)
    before = {p.name: p.stat().st_mtime_ns for p in static.iterdir()}
    site_assets.sync_built_site(tmp_path)
    assert before == {p.name: p.stat().st_mtime_ns for p in static.iterdir()}

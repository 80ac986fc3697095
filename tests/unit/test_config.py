"""nbgrader_config.py holds the grading settings the README promises."""
from traitlets.config.loader import PyFileConfigLoader

import coursekit as kit


def load():
    return PyFileConfigLoader("nbgrader_config.py", path=str(kit.REPO)).load_config()


def test_course_layout():
    c = load()
    assert c.CourseDirectory.source_directory == "solutions"
    assert c.CourseDirectory.release_directory == "notebooks"
    assert c.CourseDirectory.root == str(kit.REPO)
    assert c.CourseDirectory.course_id


def test_grading_settings_suit_pytorch():
    c = load()
    assert 60 <= c.Execute.timeout <= 600, "a training loop needs time, but a hung cell must end"
    assert c.OverwriteCells.add_missing_cells is True
    assert c.IgnorePattern.enabled is True and "UserWarning" in c.IgnorePattern.pattern
    assert 0 < c.LimitOutput.max_lines <= 1000 and 0 < c.LimitOutput.max_traceback <= 200

"""tools/drop_unused_noqa.py: unused noqa codes go, the codes in use and the reasons stay."""

from tools.drop_unused_noqa import rewrite


def test_unused_codes_go_and_reasons_stay():
    line = "    except Exception as e:  # noqa: BLE001  (NVML hiccup: recorded, not fatal)"
    assert rewrite(line, {"BLE001"}) == "    except Exception as e:  # NVML hiccup: recorded, not fatal"
    assert rewrite("        except Exception:  # noqa: BLE001", {"BLE001"}) == "        except Exception:"
    # a code still in use stays, with its reason
    assert (rewrite("import book  # noqa: F401,E402  (first: GPU or simulator)", {"E402"})
            == "import book  # noqa: F401  (first: GPU or simulator)")
    assert rewrite("x = 1  # noqa:E731", {"E731"}) == "x = 1"
    assert rewrite("x = 1  # a plain comment", {"E731"}) == "x = 1  # a plain comment"

def test_the_generated_validate_takes_any_schema_name_and_refuses_an_unknown_one() -> None:
    from openagents import _rt
    from openagents._generated import models as gm

    found = gm.validate("Turn", {})
    assert found and all(isinstance(v, _rt.Violation) for v in found)
    assert any(v.keyword == "required" for v in found)
    for name in gm.TYPES:
        gm.validate(name, {})  # every schema name is known
    try:
        gm.validate("NoSuchType", {})
    except _rt.UnknownTypeName as e:
        assert "NoSuchType" in str(e) and "Turn" in str(e)
    else:
        raise AssertionError("an unknown type name must be an error, not valid")

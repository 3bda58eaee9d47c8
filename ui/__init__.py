"""Streamlit presentation helpers shared by the pages (no numerics here)."""

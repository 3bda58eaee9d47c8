"""The peer a talk link is measured against: a bare Streamlit page (a title, a paragraph, one Altair chart)."""

import altair as alt
import pandas as pd
import streamlit as st

st.title("A bare page")
st.markdown("One paragraph of text, the way a page of this app opens, and one small chart below it.")
frame = pd.DataFrame({"step": range(50), "loss": [1 / (1 + i) for i in range(50)]})
st.altair_chart(alt.Chart(frame).mark_line().encode(x="step:Q", y="loss:Q"), width="stretch")
